// C++ objects owned by a PostgreSQL memory context.
// Scans keep C++ state across callbacks; if an ERROR abandons a scan, PostgreSQL never calls
// scan_end, but it does reset the scan's memory context, which deletes the object here.
#pragma once

#include <memory>

#include "boundary/boundary.hpp"
#include "boundary/pg.hpp"

namespace pgramp {

template <class T>
struct ContextOwned {
  MemoryContextCallback callback;
  T* object;
  static void Release(void* arg) {
    auto* self = static_cast<ContextOwned*>(arg);
    delete self->object;
    self->object = nullptr;
  }
  void Destroy() {
    delete object;
    object = nullptr;
  }
};

template <class T>
ContextOwned<T>* OwnInCurrentContext(std::unique_ptr<T> object) {
  auto* holder =
      static_cast<ContextOwned<T>*>(PgCall([] { return palloc0(sizeof(ContextOwned<T>)); }));
  holder->callback.func = &ContextOwned<T>::Release;
  holder->callback.arg = holder;
  holder->object = object.release();
  PgCall([&] { MemoryContextRegisterResetCallback(CurrentMemoryContext, &holder->callback); });
  return holder;
}

}  // namespace pgramp
