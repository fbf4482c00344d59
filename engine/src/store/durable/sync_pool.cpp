#include "store/durable/sync_pool.h"

namespace ramp::store {

SyncPool::SyncPool(int threads) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
}

SyncPool::~SyncPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

Status SyncPool::SyncAll(const std::vector<File*>& files) {
  if (files.size() == 1 || threads_.empty()) {
    for (File* f : files) RAMP_RETURN_IF_ERROR(f->Sync());
    return Status::OK();
  }
  std::unique_lock lock(mu_);
  error_ = Status::OK();
  for (File* f : files) queue_.push_back(f);
  pending_ = files.size();
  work_cv_.notify_all();
  // The caller works too instead of only waiting.
  while (!queue_.empty()) {
    File* f = queue_.front();
    queue_.pop_front();
    lock.unlock();
    Status st = f->Sync();
    lock.lock();
    if (!st.ok() && error_.ok()) error_ = st;
    --pending_;
  }
  done_cv_.wait(lock, [&] { return pending_ == 0; });
  return error_;
}

void SyncPool::Run() {
  std::unique_lock lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    File* f = queue_.front();
    queue_.pop_front();
    lock.unlock();
    Status st = f->Sync();
    lock.lock();
    if (!st.ok() && error_.ok()) error_ = st;
    if (--pending_ == 0) done_cv_.notify_all();
  }
}

}  // namespace ramp::store
