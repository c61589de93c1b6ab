// metal_driver.h -- runs Iron's MSL kernels on the CPU model of Metal (backend "msl-cpu").
//
// The emitted .metal file is compiled unchanged, with this header and metal_model.h, into a shared library; Python
// (iron/runtime/msl_cpu.py) generates a small trampoline that unpacks the launch's arguments and calls the kernel,
// then calls iron_model_launch below.
//
// Execution model:
//   - Kernels with collectives (threadgroup_barrier, simd_*): one threadgroup at a time, every thread of it an OS
//     thread running truly concurrently, so barriers and SIMD exchanges really synchronise threads. Threadgroup
//     memory is one allocation per threadgroup, uninitialised between groups (it keeps the last group's values).
//   - Other kernels: each threadgroup's threads run one after another (a valid schedule when nothing synchronises),
//     threadgroups spread over a few OS threads, each with its own threadgroup memory.
//   - SIMD-groups are IRON_MODEL_SIMD_WIDTH (32, Apple's width) consecutive threads of the group in linear order. A
//     simd_* call completes when no lane of its SIMD-group is still running: the lanes waiting at the same call are
//     the active threads (those at another call, at a barrier or finished are inactive), as Metal defines it for
//     divergent code. After divergent loops GPUs may or may not reconverge lanes before the next simd_* call; here
//     they do not wait for each other.
//   - A threadgroup_barrier must be reached by every thread of the group (Iron's rule); a barrier that some threads
//     skipped (they finished) is reported as an error, like the interpreter does.
//   - SIMD-group matrix operations (simdgroup_load/store/multiply_accumulate) are collectives too, of all 32 lanes
//     of a SIMD-group: metal_matrix_driver.h.
#ifndef IRON_METAL_DRIVER_H
#define IRON_METAL_DRIVER_H

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "metal_model.h"

#ifndef IRON_MODEL_SIMD_WIDTH
#define IRON_MODEL_SIMD_WIDTH 32
#endif

namespace iron_model {

using metal::uint;
using metal::uint3;

// What the trampoline passes the kernel for one thread (Metal's attribute values).
struct Ids {
    uint3 thread_position_in_grid, thread_position_in_threadgroup, threadgroup_position_in_grid;
    uint3 threads_per_threadgroup, threadgroups_per_grid;
    uint thread_index_in_simdgroup, simdgroup_index_in_threadgroup, threads_per_simdgroup;
};

struct Abort {};  // thrown in waiting threads when another thread of the group failed

// The ids of the kernel thread this OS thread runs now (for error messages).
inline thread_local const Ids* current_ids = nullptr;

// Integer / and % by zero: an unspecified value on GPUs, an error on Iron's CPU backends (docs/dsl.md). x86 traps
// on a zero divisor, and SIGFPE would kill the host process, so the emitted MSL spells each divisor that may be zero
// IRON_DIVISOR(b, line) -- b itself on Metal -- and the model throws before dividing. The message names the Python
// source line and the thread; runtime/msl_cpu.py turns it into a located ExecutionError.
template <typename T>
inline T divisor(T b, int line) {
    if (b != 0) return b;
    std::string why = "zero divisor at line " + std::to_string(line);
    if (current_ids != nullptr) {
        const uint3 p = current_ids->thread_position_in_grid;
        why += ", thread_position_in_grid " + std::to_string(p.x) + "," + std::to_string(p.y) + "," +
               std::to_string(p.z);
    }
    throw std::runtime_error(why);
}

enum State { RUNNING, AT_BARRIER, AT_SIMD, FINISHED };
struct Group;
typedef void (*Resolver)(Group& g, const std::vector<unsigned>& lanes);

struct Lane {
    State state = RUNNING;
    const void* site = nullptr;  // the call's return address: lanes at the same call exchange values
    int op = 0;
    Resolver resolve = nullptr;
    unsigned char value[8] = {0};
    int arg = 0;
    unsigned char result[8] = {0};
};

struct Group {
    std::mutex m;
    unsigned size = 0, width = IRON_MODEL_SIMD_WIDTH;
    std::vector<Lane> lanes;
    std::unique_ptr<std::condition_variable[]> wake;  // one per lane: a release wakes exactly the lanes it frees
    std::vector<unsigned> running, at_simd;           // per SIMD-group counts
    unsigned at_barrier = 0, finished = 0;
    std::string error;

    void reset(unsigned n, unsigned simd_width) {
        if (n != size || !wake) wake.reset(new std::condition_variable[n]);
        size = n;
        width = simd_width;
        lanes.assign(n, Lane());
        const unsigned groups = (n + width - 1) / width;
        running.assign(groups, 0);
        at_simd.assign(groups, 0);
        for (unsigned i = 0; i < n; ++i) ++running[i / width];
        at_barrier = finished = 0;
        error.clear();
    }
    void set_state(unsigned i, State to) {
        const unsigned s = i / width;
        switch (lanes[i].state) {
            case RUNNING: --running[s]; break;
            case AT_SIMD: --at_simd[s]; break;
            case AT_BARRIER: --at_barrier; break;
            case FINISHED: --finished; break;
        }
        lanes[i].state = to;
        switch (to) {
            case RUNNING: ++running[s]; break;
            case AT_SIMD: ++at_simd[s]; break;
            case AT_BARRIER: ++at_barrier; break;
            case FINISHED: ++finished; break;
        }
    }
    void release(unsigned i, unsigned me) {
        set_state(i, RUNNING);
        if (i != me) wake[i].notify_one();
    }
    void fail(const std::string& why) {
        if (error.empty()) error = why;
        for (unsigned i = 0; i < size; ++i) wake[i].notify_one();
    }
    // SIMD-group s: once none of its lanes runs, the lanes waiting at the same call exchange values (the active
    // lanes); lanes at another call, at a barrier or finished are inactive for it.
    void try_simd(unsigned s, unsigned me) {
        if (running[s] != 0 || at_simd[s] == 0) return;
        const unsigned first = s * width, last = first + width < size ? first + width : size;
        std::vector<bool> done(last - first, false);
        for (unsigned i = first; i < last; ++i) {
            if (lanes[i].state != AT_SIMD || done[i - first]) continue;
            std::vector<unsigned> same;
            for (unsigned j = i; j < last; ++j) {
                if (lanes[j].state == AT_SIMD && !done[j - first] && lanes[j].site == lanes[i].site &&
                    lanes[j].op == lanes[i].op) {
                    same.push_back(j);
                    done[j - first] = true;
                }
            }
            lanes[i].resolve(*this, same);
            for (unsigned j : same) release(j, me);
        }
    }
    // The barrier: once every thread is at it or finished. Threads that returned are not waited for: Iron's rule
    // (CUDA's since sm_70; docs/dsl.md "Semantics the backends share"), the same on every backend.
    void try_barrier(unsigned me) {
        if (at_barrier == 0 || at_barrier + finished != size) return;
        for (unsigned i = 0; i < size; ++i) {
            if (lanes[i].state == AT_BARRIER) release(i, me);  // a finished thread stays finished
        }
    }
    // Thread `me` (lock held) stops at a collective (state `at`); returns when it runs again.
    void wait(std::unique_lock<std::mutex>& lock, unsigned me, State at) {
        set_state(me, at);
        try_simd(me / width, me);
        if (at != AT_SIMD) try_barrier(me);
        wake[me].wait(lock, [&] { return lanes[me].state == RUNNING || !error.empty(); });
        if (!error.empty()) throw Abort();
    }
    void finish(unsigned me) {
        std::unique_lock<std::mutex> lock(m);
        set_state(me, FINISHED);
        try_simd(me / width, me);
        try_barrier(me);
    }
};

struct Thread {
    Group* group;
    unsigned index;  // linear index in the threadgroup
};
inline thread_local Thread* current = nullptr;

inline Thread& me() {
    if (current == nullptr) {
        fprintf(stderr, "iron msl-cpu: a collective was called outside a concurrent threadgroup\n");
        abort();
    }
    return *current;
}

enum Op { SUM = 1, MAX, MIN, SHUFFLE, SHUFFLE_XOR, BROADCAST, ACTIVE, SIMD_BARRIER, BALLOT, ANY, ALL, PREFIX_INCL,
          PREFIX_EXCL };

template <typename T>
T load(const unsigned char* bytes) {
    T v;
    memcpy(&v, bytes, sizeof(T));
    return v;
}
template <typename T>
void store(unsigned char* bytes, T v) {
    memcpy(bytes, &v, sizeof(T));
}

// Reductions in lane order; integers wrap, floats ignore NaN like fmax/fmin (the model's choice; Metal leaves NaN
// handling and the order of a float sum unspecified).
template <typename T>
T combine(int op, T a, T b) {
    if constexpr (std::is_integral<T>::value) {
        typedef typename std::make_unsigned<T>::type U;
        if (op == SUM) return (T)(U)((U)a + (U)b);  // wraps
        return op == MAX ? (a > b ? a : b) : (a < b ? a : b);
    }
    if (op == SUM) return (T)(a + b);
    if (a != a) return b;
    if (b != b) return a;
    if (op == MAX) return a > b ? a : b;
    return a < b ? a : b;
}

template <typename T>
void resolve_reduce(Group& g, const std::vector<unsigned>& lanes) {
    const int op = g.lanes[lanes[0]].op;
    T acc = load<T>(g.lanes[lanes[0]].value);
    for (size_t k = 1; k < lanes.size(); ++k) acc = combine<T>(op, acc, load<T>(g.lanes[lanes[k]].value));
    for (unsigned i : lanes) store<T>(g.lanes[i].result, acc);
}

// Shuffles: the value of the lane read if it is active, else the reader's own value (Metal: undefined).
template <typename T>
void resolve_shuffle(Group& g, const std::vector<unsigned>& lanes) {
    const unsigned base = lanes[0] / g.width * g.width;
    for (unsigned i : lanes) {
        const Lane& l = g.lanes[i];
        const unsigned own = i - base;
        const unsigned src = l.op == SHUFFLE_XOR ? own ^ (unsigned)l.arg : (unsigned)l.arg;
        store<T>(g.lanes[i].result, load<T>(l.value));
        for (unsigned j : lanes) {
            if (j - base == src) store<T>(g.lanes[i].result, load<T>(g.lanes[j].value));
        }
    }
}

inline void resolve_active(Group& g, const std::vector<unsigned>& lanes) {
    const unsigned base = lanes[0] / g.width * g.width;
    metal::ulong mask = 0;
    for (unsigned j : lanes) mask |= (metal::ulong)1 << (j - base);
    for (unsigned i : lanes) store<metal::ulong>(g.lanes[i].result, mask);
}

inline void resolve_nothing(Group&, const std::vector<unsigned>&) {}

// Votes: the mask of the waiting lanes whose value is non-zero (ANY/ALL pass cond / !cond and test it).
inline void resolve_ballot(Group& g, const std::vector<unsigned>& lanes) {
    const unsigned base = lanes[0] / g.width * g.width;
    metal::ulong mask = 0;
    for (unsigned j : lanes) {
        if (load<metal::ulong>(g.lanes[j].value) != 0) mask |= (metal::ulong)1 << (j - base);
    }
    for (unsigned i : lanes) store<metal::ulong>(g.lanes[i].result, mask);
}

// Prefix sums over the waiting lanes, in lane order (integers wrap).
template <typename T>
void resolve_scan(Group& g, const std::vector<unsigned>& lanes) {
    const bool inclusive = g.lanes[lanes[0]].op == PREFIX_INCL;
    T acc = (T)0;
    for (unsigned i : lanes) {
        const T v = load<T>(g.lanes[i].value);
        if (!inclusive) store<T>(g.lanes[i].result, acc);
        acc = combine<T>(SUM, acc, v);
        if (inclusive) store<T>(g.lanes[i].result, acc);
    }
}

template <typename T>
T collective(const void* site, int op, Resolver resolve, T value, int arg) {
    Thread& t = me();
    Group& g = *t.group;
    std::unique_lock<std::mutex> lock(g.m);
    Lane& l = g.lanes[t.index];
    l.site = site;
    l.op = op;
    l.resolve = resolve;
    memset(l.value, 0, sizeof l.value);
    store<T>(l.value, value);
    l.arg = arg;
    g.wait(lock, t.index, AT_SIMD);
    return load<T>(l.result);
}

inline void barrier() {
    Thread& t = me();
    Group& g = *t.group;
    std::unique_lock<std::mutex> lock(g.m);
    g.wait(lock, t.index, AT_BARRIER);
}

}  // namespace iron_model

// -- the collectives metal_model.h declares -----------------------------------------------------------------------
namespace metal {

void threadgroup_barrier(mem_flags) { iron_model::barrier(); }
void simdgroup_barrier(mem_flags) {
    iron_model::collective<int>(__builtin_return_address(0), iron_model::SIMD_BARRIER, iron_model::resolve_nothing,
                                0, 0);
}
simd_vote simd_active_threads_mask() {
    simd_vote v;
    v.v = iron_model::collective<ulong>(__builtin_return_address(0), iron_model::ACTIVE, iron_model::resolve_active,
                                        0, 0);
    return v;
}

#define IRON_DRIVER_SIMD(T)                                                                                         \
    T simd_sum(T data) {                                                                                            \
        return iron_model::collective<T>(__builtin_return_address(0), iron_model::SUM,                              \
                                         iron_model::resolve_reduce<T>, data, 0);                                   \
    }                                                                                                               \
    T simd_max(T data) {                                                                                            \
        return iron_model::collective<T>(__builtin_return_address(0), iron_model::MAX,                              \
                                         iron_model::resolve_reduce<T>, data, 0);                                   \
    }                                                                                                               \
    T simd_min(T data) {                                                                                            \
        return iron_model::collective<T>(__builtin_return_address(0), iron_model::MIN,                              \
                                         iron_model::resolve_reduce<T>, data, 0);                                   \
    }                                                                                                               \
    T simd_shuffle(T data, ushort lane) {                                                                           \
        return iron_model::collective<T>(__builtin_return_address(0), iron_model::SHUFFLE,                          \
                                         iron_model::resolve_shuffle<T>, data, lane);                               \
    }                                                                                                               \
    T simd_shuffle_xor(T data, ushort mask) {                                                                       \
        return iron_model::collective<T>(__builtin_return_address(0), iron_model::SHUFFLE_XOR,                      \
                                         iron_model::resolve_shuffle<T>, data, mask);                               \
    }                                                                                                               \
    T simd_broadcast(T data, ushort lane) {                                                                         \
        return iron_model::collective<T>(__builtin_return_address(0), iron_model::BROADCAST,                        \
                                         iron_model::resolve_shuffle<T>, data, lane);                               \
    }
IRON_DRIVER_SIMD(float)
IRON_DRIVER_SIMD(int)
IRON_DRIVER_SIMD(uint)
IRON_DRIVER_SIMD(half)
IRON_DRIVER_SIMD(ushort)
#undef IRON_DRIVER_SIMD

simd_vote simd_ballot(bool expr) {
    simd_vote v;
    v.v = iron_model::collective<ulong>(__builtin_return_address(0), iron_model::BALLOT, iron_model::resolve_ballot,
                                        expr ? 1 : 0, 0);
    return v;
}
bool simd_any(bool expr) {
    return iron_model::collective<ulong>(__builtin_return_address(0), iron_model::ANY, iron_model::resolve_ballot,
                                         expr ? 1 : 0, 0) != 0;
}
bool simd_all(bool expr) {
    return iron_model::collective<ulong>(__builtin_return_address(0), iron_model::ALL, iron_model::resolve_ballot,
                                         expr ? 0 : 1, 0) == 0;
}
#define IRON_DRIVER_SCAN(T)                                                                                         \
    T simd_prefix_inclusive_sum(T data) {                                                                           \
        return iron_model::collective<T>(__builtin_return_address(0), iron_model::PREFIX_INCL,                      \
                                         iron_model::resolve_scan<T>, data, 0);                                     \
    }                                                                                                               \
    T simd_prefix_exclusive_sum(T data) {                                                                           \
        return iron_model::collective<T>(__builtin_return_address(0), iron_model::PREFIX_EXCL,                      \
                                         iron_model::resolve_scan<T>, data, 0);                                     \
    }
IRON_DRIVER_SCAN(float)
IRON_DRIVER_SCAN(int)
IRON_DRIVER_SCAN(uint)
#undef IRON_DRIVER_SCAN

}  // namespace metal

#include "metal_matrix_driver.h"  // simdgroup_matrix's collective

#define IRON_DIVISOR(b, line) iron_model::divisor((b), (line))

// -- the launch ---------------------------------------------------------------------------------------------------
namespace iron_model {

typedef void (*Invoke)(void* const* args, void* const* threadgroup, const Ids& ids);

struct Launch {
    Invoke invoke;
    void* const* args;
    const unsigned* tg_bytes;
    unsigned n_tg;
    unsigned grid_groups[3], group[3];
    unsigned simd_width;
};

inline Ids ids_of(const Launch& L, const unsigned g[3], unsigned linear) {
    Ids id;
    const unsigned lx = linear % L.group[0], ly = linear / L.group[0] % L.group[1],
                   lz = linear / (L.group[0] * L.group[1]);
    id.thread_position_in_threadgroup = uint3{lx, ly, lz};
    id.threadgroup_position_in_grid = uint3{g[0], g[1], g[2]};
    id.threads_per_threadgroup = uint3{L.group[0], L.group[1], L.group[2]};
    id.threadgroups_per_grid = uint3{L.grid_groups[0], L.grid_groups[1], L.grid_groups[2]};
    id.thread_position_in_grid =
        uint3{g[0] * L.group[0] + lx, g[1] * L.group[1] + ly, g[2] * L.group[2] + lz};
    id.thread_index_in_simdgroup = linear % L.simd_width;
    id.simdgroup_index_in_threadgroup = linear / L.simd_width;
    id.threads_per_simdgroup = L.simd_width;
    return id;
}

struct Storage {  // one threadgroup's memory: 16-byte aligned arrays, one per [[threadgroup(i)]]
    std::vector<unsigned char> bytes;
    std::vector<void*> ptrs;
    explicit Storage(const Launch& L) {
        size_t total = 0;
        std::vector<size_t> offsets;
        for (unsigned i = 0; i < L.n_tg; ++i) {
            offsets.push_back(total);
            total += (L.tg_bytes[i] + 15u) / 16u * 16u;
        }
        bytes.assign(total + 16, 0xA5);  // poisoned: threadgroup memory starts undefined
        unsigned char* base = bytes.data() + (16 - (uintptr_t)bytes.data() % 16) % 16;
        for (size_t off : offsets) ptrs.push_back(base + off);
    }
};

inline void group_coords(const Launch& L, unsigned long g, unsigned out[3]) {
    out[0] = (unsigned)(g % L.grid_groups[0]);
    out[1] = (unsigned)(g / L.grid_groups[0] % L.grid_groups[1]);
    out[2] = (unsigned)(g / ((unsigned long)L.grid_groups[0] * L.grid_groups[1]));
}

// Kernels without collectives: groups spread over `workers` OS threads, a group's threads run in order.
inline std::string run_independent(const Launch& L, unsigned workers) {
    const unsigned long groups = (unsigned long)L.grid_groups[0] * L.grid_groups[1] * L.grid_groups[2];
    const unsigned size = L.group[0] * L.group[1] * L.group[2];
    std::string error;
    std::mutex error_lock;
    auto work = [&](unsigned w) {
        Storage storage(L);
        try {
            for (unsigned long g = w; g < groups; g += workers) {
                unsigned c[3];
                group_coords(L, g, c);
                for (unsigned i = 0; i < size; ++i) {
                    const Ids ids = ids_of(L, c, i);
                    current_ids = &ids;
                    L.invoke(L.args, storage.ptrs.data(), ids);
                }
            }
        } catch (const std::exception& e) {
            std::lock_guard<std::mutex> hold(error_lock);
            if (error.empty()) error = e.what();
        }
        current_ids = nullptr;
    };
    // pthreads, not std::thread: the model defines `thread` (an MSL address space) as a macro
    struct Job {
        decltype(work)* fn;
        unsigned w;
    };
    std::vector<Job> jobs(workers);
    std::vector<pthread_t> pool(workers);
    unsigned started = 1;
    for (unsigned w = 1; w < workers; ++w) {
        jobs[w] = Job{&work, w};
        if (pthread_create(&pool[w], nullptr, [](void* p) -> void* {
                Job& job = *static_cast<Job*>(p);
                (*job.fn)(job.w);
                return nullptr;
            }, &jobs[w]) != 0) {
            break;
        }
        started = w + 1;
    }
    for (unsigned w = started; w < workers; ++w) work(w);  // threads that could not start: run their share here
    work(0);
    for (unsigned w = 1; w < started; ++w) pthread_join(pool[w], nullptr);
    return error;
}

struct Worker {
    pthread_t handle;
    unsigned index;
    struct Shared* shared;
};

struct Shared {
    const Launch* L;
    Group group;
    Storage* storage;
    unsigned coords[3];
    std::mutex m;
    std::condition_variable cv;
    unsigned long generation = 0;  // one per threadgroup run; ~0 tells the workers to exit
    unsigned remaining = 0;
    bool quit = false;
};

inline void* worker_main(void* p) {
    Worker& w = *static_cast<Worker*>(p);
    Shared& s = *w.shared;
    unsigned long seen = 0;
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(s.m);
            s.cv.wait(lock, [&] { return s.quit || s.generation != seen; });
            if (s.quit) return nullptr;
            seen = s.generation;
        }
        Thread t{&s.group, w.index};
        current = &t;
        const Ids ids = ids_of(*s.L, s.coords, w.index);
        current_ids = &ids;
        try {
            s.L->invoke(s.L->args, s.storage->ptrs.data(), ids);
        } catch (const Abort&) {
        } catch (const std::exception& e) {
            std::unique_lock<std::mutex> lock(s.group.m);
            s.group.fail(e.what());
        }
        current = nullptr;
        current_ids = nullptr;
        s.group.finish(w.index);
        std::unique_lock<std::mutex> lock(s.m);
        if (--s.remaining == 0) s.cv.notify_all();
    }
}

// Kernels with collectives: one threadgroup at a time, each of its threads an OS thread.
inline std::string run_concurrent(const Launch& L) {
    const unsigned long groups = (unsigned long)L.grid_groups[0] * L.grid_groups[1] * L.grid_groups[2];
    const unsigned size = L.group[0] * L.group[1] * L.group[2];
    Shared s;
    s.L = &L;
    Storage storage(L);
    s.storage = &storage;
    s.group.reset(size, L.simd_width);
    std::vector<Worker> workers(size);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1u << 20);
    std::string error;
    unsigned started = 0;
    for (unsigned i = 0; i < size; ++i) {
        workers[i].index = i;
        workers[i].shared = &s;
        if (pthread_create(&workers[i].handle, &attr, worker_main, &workers[i]) != 0) {
            error = "could not start " + std::to_string(size) + " threads for one threadgroup";
            break;
        }
        ++started;
    }
    pthread_attr_destroy(&attr);
    for (unsigned long g = 0; g < groups && error.empty(); ++g) {
        {
            std::unique_lock<std::mutex> lock(s.group.m);
            s.group.reset(size, L.simd_width);
        }
        std::unique_lock<std::mutex> lock(s.m);
        group_coords(L, g, s.coords);
        s.remaining = size;
        ++s.generation;
        s.cv.notify_all();
        s.cv.wait(lock, [&] { return s.remaining == 0; });
        if (!s.group.error.empty()) {
            unsigned c[3];
            group_coords(L, g, c);
            error = s.group.error + " (threadgroup " + std::to_string(c[0]) + "," + std::to_string(c[1]) + "," +
                    std::to_string(c[2]) + ")";
        }
    }
    {
        std::unique_lock<std::mutex> lock(s.m);
        s.quit = true;
        s.cv.notify_all();
    }
    for (unsigned i = 0; i < started; ++i) pthread_join(workers[i].handle, nullptr);
    return error;
}

}  // namespace iron_model

// The entry point Python calls: 0 on success, else 1 with the reason in `error`.
#define IRON_MODEL_ENTRY(INVOKE)                                                                                    \
    extern "C" int iron_model_launch(void* const* args, const unsigned* tg_bytes, unsigned n_tg,                    \
                                     const unsigned* grid_groups, const unsigned* group, unsigned simd_width,       \
                                     int concurrent, unsigned workers, char* error, unsigned error_size) {         \
        iron_model::Launch L{INVOKE, args, tg_bytes, n_tg, {grid_groups[0], grid_groups[1], grid_groups[2]},       \
                             {group[0], group[1], group[2]}, simd_width};                                          \
        std::string why = concurrent ? iron_model::run_concurrent(L) : iron_model::run_independent(L, workers);    \
        if (why.empty()) return 0;                                                                                  \
        snprintf(error, error_size, "%s", why.c_str());                                                             \
        return 1;                                                                                                   \
    }

#endif  // IRON_METAL_DRIVER_H
