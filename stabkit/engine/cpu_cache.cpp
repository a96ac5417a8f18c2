// A caching CPU allocator for torch: large blocks freed by tensors stay in the process for the next
// allocation of the same size instead of going back to the kernel (stabkit/engine/alloc.py says why).
//
// Blocks of at least kMinBytes are rounded up to whole 2 MB huge pages, taken from a per-size free list
// when one is there, else fresh (2 MB aligned; huge pages asked for as torch asks, THP_MEM_ALLOC_ENABLE=1).
// Freed blocks are kept while the cached bytes stay within the limit; the least recently freed go first.
// A new block is never taken while the cache sits on memory the system lacks: on a miss, when the kernel's
// MemAvailable is below the block plus kHeadroom, cached blocks are freed first (Linux overcommits, so an
// allocation does not fail when memory runs out: the OOM killer ends the process instead, with the cache's
// blocks still held; a ResNet-18-GN run on Tiny ImageNet was killed so).
// Smaller blocks go to c10's own alloc_cpu/free_cpu, as before (glibc's heap keeps those, alloc.py). Every
// DataPtr's context is its data pointer, so raw_allocate and raw_deallocate work as with torch's default
// allocator.
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <unordered_map>

namespace {

constexpr size_t kPage = size_t(2) << 20;
constexpr size_t kMinBytes = size_t(32) << 20;  // glibc's largest mmap threshold: larger blocks are mmaps
constexpr size_t kHeadroom = size_t(512) << 20;  // memory left to the rest of the process and the system

long long assumed_available = -1;  // tests: the MemAvailable to assume (-1: read the kernel's)

// The kernel's MemAvailable in bytes, or -1 where it cannot be read.
long long mem_available() {
  if (assumed_available >= 0) return assumed_available;
  FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return -1;
  char line[256];
  long long kb = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "MemAvailable: %lld kB", &kb) == 1) break;
  std::fclose(f);
  return kb < 0 ? -1 : kb * 1024;
}

struct Cache final : public c10::Allocator {
  std::mutex mu;
  size_t limit = 0, cached = 0, hits = 0, misses = 0;
  std::unordered_map<void*, size_t> big;  // live and cached big blocks -> rounded size
  std::list<std::pair<void*, size_t>> lru;  // cached blocks, least recently freed first
  std::multimap<size_t, std::list<std::pair<void*, size_t>>::iterator> by_size;

  c10::DataPtr allocate(size_t n) override {
    void* p = n >= kMinBytes ? take((n + kPage - 1) / kPage * kPage) : c10::alloc_cpu(n);
    return {p, p, &release_block, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release_block; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  void* take(size_t size) {
    {
      std::lock_guard<std::mutex> g(mu);
      auto it = by_size.find(size);
      if (it != by_size.end()) {
        void* p = it->second->first;
        lru.erase(it->second);
        by_size.erase(it);
        cached -= size;
        ++hits;
        return p;
      }
      ++misses;
    }
    make_room(size);
    void* p = fresh(size);
    if (!p) {  // out of memory: give the cache back to the system and try once more
      trim(0);
      p = fresh(size);
    }
    TORCH_CHECK(p, "DefaultCPUAllocator: not enough memory: you tried to allocate ", size, " bytes.");
    std::lock_guard<std::mutex> g(mu);
    big[p] = size;
    return p;
  }

  static void* fresh(size_t size) {
    void* p = nullptr;
    if (posix_memalign(&p, kPage, size) != 0) return nullptr;
    const char* thp = std::getenv("THP_MEM_ALLOC_ENABLE");  // torch's switch for huge pages, honoured alike
    if (thp && std::strcmp(thp, "1") == 0) madvise(p, size, MADV_HUGEPAGE);
    return p;
  }

  void give_back(void* p) {
    std::unique_lock<std::mutex> g(mu);
    auto it = big.find(p);
    if (it == big.end()) {
      g.unlock();
      c10::free_cpu(p);
      return;
    }
    size_t size = it->second;
    if (size > limit) {
      big.erase(it);
      g.unlock();
      free(p);
      return;
    }
    lru.emplace_back(p, size);
    by_size.emplace(size, std::prev(lru.end()));
    cached += size;
    g.unlock();
    trim(limit);
  }

  // Before a fresh block of `size` bytes: free cached blocks (least recently freed first) until the system
  // has the block and kHeadroom available, or nothing is cached.
  void make_room(size_t size) {
    size_t held;
    {
      std::lock_guard<std::mutex> g(mu);
      held = cached;
    }
    if (held == 0) return;
    long long avail = mem_available();
    long long short_by = static_cast<long long>(size + kHeadroom) - avail;
    if (avail < 0 || short_by <= 0) return;
    trim(held > static_cast<size_t>(short_by) ? held - static_cast<size_t>(short_by) : 0);
  }

  // Free cached blocks, least recently freed first, until at most `keep` bytes stay cached.
  void trim(size_t keep) {
    std::list<void*> out;
    {
      std::lock_guard<std::mutex> g(mu);
      while (cached > keep && !lru.empty()) {
        auto [p, size] = lru.front();
        auto range = by_size.equal_range(size);
        for (auto i = range.first; i != range.second; ++i)
          if (i->second == lru.begin()) { by_size.erase(i); break; }
        lru.pop_front();
        big.erase(p);
        cached -= size;
        out.push_back(p);
      }
    }
    for (void* p : out) free(p);
  }

  static void release_block(void* p);
};

Cache* cache = nullptr;

void Cache::release_block(void* p) { cache->give_back(p); }

}  // namespace

extern "C" {

// Install the cache as torch's CPU allocator (once; later calls only set the limit). Returns 1.
int stabkit_cpu_cache_install(size_t limit) {
  if (!cache) {
    cache = new Cache();  // never deleted: tensors may outlive any scope
    cache->limit = limit;
    c10::SetCPUAllocator(cache, /*priority=*/1);
  }
  {
    std::lock_guard<std::mutex> g(cache->mu);
    cache->limit = limit;
  }
  cache->trim(limit);
  return 1;
}

// out[0..3]: cached bytes, limit, hits, misses.
void stabkit_cpu_cache_stats(size_t* out) {
  if (!cache) { out[0] = out[1] = out[2] = out[3] = 0; return; }
  std::lock_guard<std::mutex> g(cache->mu);
  out[0] = cache->cached; out[1] = cache->limit; out[2] = cache->hits; out[3] = cache->misses;
}

// Give every cached block back to the system.
void stabkit_cpu_cache_release() {
  if (cache) cache->trim(0);
}

// Tests: take `bytes` as the system's available memory (-1: read /proc/meminfo again).
void stabkit_cpu_cache_assume_available(long long bytes) { assumed_available = bytes; }

}  // extern "C"
