// metal_model.h -- a model of the parts of Metal (MSL 3.1) that Iron's emitted kernels use, as plain C++17 for clang.
//
// Purpose: `clang -fsyntax-only -std=c++17 -I <this folder> -include metal_model.h kernel.metal` type-checks the exact
// MSL Iron emits (the same bytes `iron build` writes and the Metal runtime would load) on machines without Apple's
// compiler. It proves the source is well-formed C++ with the types, overloads and conversions declared here; it does
// NOT prove that Apple's compiler accepts it (this header may be more permissive than Metal, or disagree with it).
//
// How Metal maps to C++ here:
//   - address spaces (device, constant, threadgroup, thread) and `kernel` are empty macros; `[[buffer(0)]]` and the
//     other Metal attributes are unknown C++ attributes, which clang ignores (compile with -Wno-unknown-attributes);
//   - half is _Float16 (arithmetic on x86-64 and arm64); bfloat is a 16-bit storage struct with explicit conversions
//     from/to float rounding to nearest even (Iron computes bf16 math in float, so no operators are needed);
//   - vector types are clang ext_vector_type vectors (swizzles .x/.xy/... work as in Metal);
//   - math functions forward to clang builtins; atomics are real (GCC __atomic builtins on the wrapped value);
//   - threadgroup_barrier, simd_* and simd_active_threads_mask are declared only: what they do depends on which
//     threads run together, which is the business of an execution driver;
//   - simdgroup_matrix<T, 8, 8> and its functions are in metal_simdgroup_matrix.h (included below): the storage and
//     conversions are here, the SIMD-group collective they end in (iron_model_simdgroup_matrix) is the driver's.
//
// For a later CPU driver (issue 6, point 3): define IRON_MSL_MODEL_DRIVER before including this header and provide
// definitions of the declared collectives (threadgroup_barrier, simd_*) over the driver's own thread context; the
// kernel's attribute parameters ([[thread_position_in_grid]], ...) are ordinary trailing parameters the driver
// passes. Threadgroup arrays are function-scope locals in the emitted source; such a driver must run them as shared
// storage (e.g. one group at a time with `threadgroup` defined as `static`, see docs/backends/metal.md) -- that mode
// is not implemented here yet, so by default `threadgroup` is empty.
#ifndef IRON_METAL_MODEL_H
#define IRON_METAL_MODEL_H

#include <stdint.h>

#define kernel
#define device
#define constant const  // Metal's constant address space is read-only
// threadgroup is `volatile`: a qualifier wherever MSL puts the address space (declarations, casts, parameters),
// and -- as C++ reads keywords inside [[...]] as identifiers -- an ignored attribute in [[threadgroup(i)]]
#ifndef threadgroup
#define threadgroup volatile
#endif
#define thread

#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")

namespace metal {

typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef uint64_t ulong;
typedef _Float16 half;

struct bfloat;
template <typename U>
struct iron_model_is_bfloat {};
template <>
struct iron_model_is_bfloat<bfloat> {
    typedef void type;
};

// bfloat (MSL 3.1): storage with explicit conversions, rounding to nearest even (NaN stays a quiet NaN).
struct bfloat {
    ushort bits;
    bfloat() = default;
    explicit bfloat(float f) {
        const uint u = __builtin_bit_cast(uint, f);
        if ((u & 0x7fffffffu) > 0x7f800000u) {
            bits = (ushort)((u >> 16) | 0x40u);
        } else {
            bits = (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
        }
    }
    explicit operator float() const { return __builtin_bit_cast(float, (uint)bits << 16); }
    // threadgroup (volatile) storage; the assignments and the construction from a volatile element (`const bfloat v
    // = sh[0];`) are templates so that bfloat stays trivially copyable (a template is never a copy constructor)
    template <typename U, typename = typename iron_model_is_bfloat<U>::type>
    bfloat(const volatile U& other) : bits(other.bits) {}
    explicit operator float() const volatile { return __builtin_bit_cast(float, (uint)bits << 16); }
    template <typename U, typename = typename iron_model_is_bfloat<U>::type>
    bfloat& operator=(const volatile U& other) {
        bits = other.bits;
        return *this;
    }
    template <typename U, typename = typename iron_model_is_bfloat<U>::type>
    void operator=(const volatile U& other) volatile {
        bits = other.bits;
    }
    // from a value (a constant, a converted result) into threadgroup storage
    template <typename U, typename = typename iron_model_is_bfloat<U>::type>
    void operator=(const U& other) volatile {
        bits = other.bits;
    }
};
static_assert(__is_trivially_copyable(bfloat), "bfloat must stay trivially copyable (as_type)");

#define IRON_MODEL_VECTORS(T)                                     \
    typedef T T##2 __attribute__((ext_vector_type(2)));           \
    typedef T T##3 __attribute__((ext_vector_type(3)));           \
    typedef T T##4 __attribute__((ext_vector_type(4)));
IRON_MODEL_VECTORS(float)
IRON_MODEL_VECTORS(int)
IRON_MODEL_VECTORS(uint)
IRON_MODEL_VECTORS(half)
IRON_MODEL_VECTORS(ushort)
IRON_MODEL_VECTORS(short)
IRON_MODEL_VECTORS(ulong)
#undef IRON_MODEL_VECTORS

// as_type<T>(x): reinterpret the bits (sizes must match, as Metal requires)
template <typename T, typename U>
constexpr T as_type(U x) {
    static_assert(sizeof(T) == sizeof(U), "as_type: the sizes differ");
    return __builtin_bit_cast(T, x);
}

// -- math (float; Iron computes f16/bf16 math in float) ------------------------------------------------------------
inline float exp(float x) { return __builtin_expf(x); }
inline float exp2(float x) { return __builtin_exp2f(x); }
namespace fast {  // Metal's fast-math spellings (Iron's fast_exp/fast_exp2): the model computes them exactly as libm
inline float exp(float x) { return __builtin_expf(x); }
inline float exp2(float x) { return __builtin_exp2f(x); }
}  // namespace fast
inline float log(float x) { return __builtin_logf(x); }
inline float log2(float x) { return __builtin_log2f(x); }
inline float sqrt(float x) { return __builtin_sqrtf(x); }
inline float rsqrt(float x) { return 1.0f / __builtin_sqrtf(x); }
inline float sin(float x) { return __builtin_sinf(x); }
inline float cos(float x) { return __builtin_cosf(x); }
inline float tanh(float x) { return __builtin_tanhf(x); }
inline float floor(float x) { return __builtin_floorf(x); }
inline float ceil(float x) { return __builtin_ceilf(x); }
inline float fabs(float x) { return __builtin_fabsf(x); }
inline float fmin(float a, float b) { return __builtin_fminf(a, b); }
inline float fmax(float a, float b) { return __builtin_fmaxf(a, b); }
inline float fmod(float a, float b) { return __builtin_fmodf(a, b); }
inline float fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
inline float copysign(float a, float b) { return __builtin_copysignf(a, b); }
inline float rint(float x) { return __builtin_rintf(x); }
inline float atan2(float y, float x) { return __builtin_atan2f(y, x); }
inline float pow(float x, float y) { return __builtin_powf(x, y); }
inline bool isnan(float x) { return __builtin_isnan(x); }
inline bool isinf(float x) { return __builtin_isinf(x); }
inline int min(int a, int b) { return a < b ? a : b; }
inline uint min(uint a, uint b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline uint max(uint a, uint b) { return a > b ? a : b; }
inline int abs(int x) { return x < 0 ? -x : x; }
inline long min(long a, long b) { return a < b ? a : b; }
inline ulong min(ulong a, ulong b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline ulong max(ulong a, ulong b) { return a > b ? a : b; }
// Metal's char is signed 8 bits and long 64 bits (the model runs on an LP64 host)
static_assert((char)-1 < 0 && sizeof(long) == 8, "the Metal model needs a signed char and a 64-bit long");
inline uint clz(uint x) { return x == 0u ? 32u : (uint)__builtin_clz(x); }
// integer bits (issue 15 point 3): Metal defines clz(0) = ctz(0) = 32; mulhi is the high word of the full product
inline int clz(int x) { return (int)clz((uint)x); }
inline uint ctz(uint x) { return x == 0u ? 32u : (uint)__builtin_ctz(x); }
inline int ctz(int x) { return (int)ctz((uint)x); }
inline uint popcount(uint x) { return (uint)__builtin_popcount(x); }
inline int popcount(int x) { return (int)popcount((uint)x); }
inline int mulhi(int a, int b) { return (int)(((long long)a * (long long)b) >> 32); }
inline uint mulhi(uint a, uint b) { return (uint)(((unsigned long long)a * (unsigned long long)b) >> 32); }

// -- synchronisation ------------------------------------------------------------------------------------------------
enum class mem_flags : uint { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };
inline constexpr mem_flags operator|(mem_flags a, mem_flags b) { return (mem_flags)((uint)a | (uint)b); }
void threadgroup_barrier(mem_flags flags);
void simdgroup_barrier(mem_flags flags);

// -- SIMD-groups (32 lanes on Apple GPUs); declared for the types Iron emits ----------------------------------------
struct simd_vote {
    typedef ulong vote_t;
    vote_t v;
    explicit operator vote_t() const { return v; }
    bool all() const;
    bool any() const;
};
simd_vote simd_active_threads_mask();
#define IRON_MODEL_SIMD(T)                          \
    T simd_sum(T data);                             \
    T simd_max(T data);                             \
    T simd_min(T data);                             \
    T simd_shuffle(T data, ushort lane);            \
    T simd_shuffle_xor(T data, ushort mask);        \
    T simd_broadcast(T data, ushort lane);
IRON_MODEL_SIMD(float)
IRON_MODEL_SIMD(int)
IRON_MODEL_SIMD(uint)
IRON_MODEL_SIMD(half)
IRON_MODEL_SIMD(ushort)
#undef IRON_MODEL_SIMD
// votes and prefix sums over the active threads (issue 15)
simd_vote simd_ballot(bool expr);
bool simd_any(bool expr);
bool simd_all(bool expr);
#define IRON_MODEL_SCAN(T)                          \
    T simd_prefix_inclusive_sum(T data);            \
    T simd_prefix_exclusive_sum(T data);
IRON_MODEL_SCAN(float)
IRON_MODEL_SCAN(int)
IRON_MODEL_SCAN(uint)
#undef IRON_MODEL_SCAN

// -- atomics (relaxed order only, as in Metal) ----------------------------------------------------------------------
enum memory_order { memory_order_relaxed = __ATOMIC_RELAXED, memory_order_seq_cst = __ATOMIC_SEQ_CST };
// MSL 3.2's fence (Iron's fence()): groups may run on different host threads here, so it is a real fence
enum thread_scope { thread_scope_thread, thread_scope_simdgroup, thread_scope_threadgroup, thread_scope_device };
inline void atomic_thread_fence(mem_flags, memory_order, thread_scope = thread_scope_device) {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
template <typename T>
struct _atomic {
    T value;
};
typedef _atomic<int> atomic_int;
typedef _atomic<uint> atomic_uint;
typedef _atomic<float> atomic_float;
template <typename T>
struct iron_model_same {
    typedef T type;
};

template <typename T>
T atomic_load_explicit(_atomic<T>* object, memory_order) {
    T value;
    __atomic_load(&object->value, &value, __ATOMIC_RELAXED);
    return value;
}
template <typename T>
void atomic_store_explicit(_atomic<T>* object, typename iron_model_same<T>::type desired, memory_order) {
    __atomic_store(&object->value, &desired, __ATOMIC_RELAXED);
}
template <typename T>
bool atomic_compare_exchange_weak_explicit(_atomic<T>* object, T* expected, typename iron_model_same<T>::type desired,
                                           memory_order, memory_order) {
    return __atomic_compare_exchange(&object->value, expected, &desired, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}
inline int atomic_fetch_add_explicit(atomic_int* object, int operand, memory_order) {
    return __atomic_fetch_add(&object->value, operand, __ATOMIC_RELAXED);
}
inline uint atomic_fetch_add_explicit(atomic_uint* object, uint operand, memory_order) {
    return __atomic_fetch_add(&object->value, operand, __ATOMIC_RELAXED);
}
inline float atomic_fetch_add_explicit(atomic_float* object, float operand, memory_order) {
    float old;
    __atomic_load(&object->value, &old, __ATOMIC_RELAXED);
    float desired = old + operand;
    while (!__atomic_compare_exchange(&object->value, &old, &desired, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        desired = old + operand;
    }
    return old;
}
inline int atomic_fetch_max_explicit(atomic_int* object, int operand, memory_order) {
    return __atomic_fetch_max(&object->value, operand, __ATOMIC_RELAXED);
}
inline uint atomic_fetch_max_explicit(atomic_uint* object, uint operand, memory_order) {
    return __atomic_fetch_max(&object->value, operand, __ATOMIC_RELAXED);
}
// integer min/and/or/xor/exchange (issue 15 point 4), relaxed as every Metal atomic
#define IRON_MODEL_ATOMIC_INT(T)                                                                                       \
    inline T atomic_fetch_min_explicit(_atomic<T>* object, T operand, memory_order) {                                  \
        return __atomic_fetch_min(&object->value, operand, __ATOMIC_RELAXED);                                          \
    }                                                                                                                  \
    inline T atomic_fetch_and_explicit(_atomic<T>* object, T operand, memory_order) {                                  \
        return __atomic_fetch_and(&object->value, operand, __ATOMIC_RELAXED);                                          \
    }                                                                                                                  \
    inline T atomic_fetch_or_explicit(_atomic<T>* object, T operand, memory_order) {                                   \
        return __atomic_fetch_or(&object->value, operand, __ATOMIC_RELAXED);                                           \
    }                                                                                                                  \
    inline T atomic_fetch_xor_explicit(_atomic<T>* object, T operand, memory_order) {                                  \
        return __atomic_fetch_xor(&object->value, operand, __ATOMIC_RELAXED);                                          \
    }                                                                                                                  \
    inline T atomic_exchange_explicit(_atomic<T>* object, T desired, memory_order) {                                   \
        return __atomic_exchange_n(&object->value, desired, __ATOMIC_RELAXED);                                         \
    }
IRON_MODEL_ATOMIC_INT(int)
IRON_MODEL_ATOMIC_INT(uint)
#undef IRON_MODEL_ATOMIC_INT

// the same operations on threadgroup (volatile in this model) atomics
template <typename T>
T atomic_load_explicit(volatile _atomic<T>* object, memory_order order) {
    return atomic_load_explicit(const_cast<_atomic<T>*>(object), order);
}
template <typename T>
void atomic_store_explicit(volatile _atomic<T>* object, typename iron_model_same<T>::type desired, memory_order order) {
    atomic_store_explicit(const_cast<_atomic<T>*>(object), desired, order);
}
template <typename T>
bool atomic_compare_exchange_weak_explicit(volatile _atomic<T>* object, T* expected,
                                           typename iron_model_same<T>::type desired, memory_order success,
                                           memory_order failure) {
    return atomic_compare_exchange_weak_explicit(const_cast<_atomic<T>*>(object), expected, desired, success, failure);
}
template <typename T>
T atomic_fetch_add_explicit(volatile _atomic<T>* object, typename iron_model_same<T>::type operand, memory_order order) {
    return atomic_fetch_add_explicit(const_cast<_atomic<T>*>(object), operand, order);
}
template <typename T>
T atomic_fetch_max_explicit(volatile _atomic<T>* object, typename iron_model_same<T>::type operand, memory_order order) {
    return atomic_fetch_max_explicit(const_cast<_atomic<T>*>(object), operand, order);
}
#define IRON_MODEL_ATOMIC_VOLATILE(NAME)                                                                               \
    template <typename T>                                                                                              \
    T NAME(volatile _atomic<T>* object, typename iron_model_same<T>::type operand, memory_order order) {               \
        return NAME(const_cast<_atomic<T>*>(object), operand, order);                                                  \
    }
IRON_MODEL_ATOMIC_VOLATILE(atomic_fetch_min_explicit)
IRON_MODEL_ATOMIC_VOLATILE(atomic_fetch_and_explicit)
IRON_MODEL_ATOMIC_VOLATILE(atomic_fetch_or_explicit)
IRON_MODEL_ATOMIC_VOLATILE(atomic_fetch_xor_explicit)
IRON_MODEL_ATOMIC_VOLATILE(atomic_exchange_explicit)
#undef IRON_MODEL_ATOMIC_VOLATILE

}  // namespace metal

#include "metal_simdgroup_matrix.h"

#endif  // IRON_METAL_MODEL_H
