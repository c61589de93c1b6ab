// metal_simdgroup_matrix.h -- the model of Metal's SIMD-group matrices (MSL 2.3+, <metal_simdgroup_matrix>),
// included by metal_model.h: simdgroup_matrix<T, 8, 8> for T = float, half, bfloat, make_filled_simdgroup_matrix,
// simdgroup_load, simdgroup_store and simdgroup_multiply_accumulate.
//
// Storage: a matrix belongs to a SIMD-group of 32 lanes; lane l holds elements (r, c) and (r, c + 1) in
// thread_elements()[0] and [1], with
//     r = 4 (l / 16) + (l / 2) % 4,    c = 4 ((l / 8) % 2) + 2 (l % 2).
// Apple does not document this layout; it is the one Apple's MLX relies on for Apple GPUs (the lane coordinates
// sm, sn of BlockMMA in mlx/backend/metal/kernels/steel/gemm/mma.h, which reads and writes thread_elements()), and
// Iron's MSL relies on it too (codegen/cfamily/msl_matrix.py: per-element loads and masked stores).
//
// Semantics: load, store and multiply_accumulate are collectives of the SIMD-group. Each ends in the driver's
// iron_model_simdgroup_matrix, where the lanes meet as for simd_*; the operation runs there once for the whole group,
// after every lane arrived (a load reads memory that the group's lanes wrote before it; a store is complete when any
// lane continues). All 32 lanes must call it with the same arguments (Metal's rule: uniform control flow); a call by
// fewer lanes, with differing arguments, or in a SIMD-group that is not 32 wide is an error, never a wrong answer.
// make_filled_simdgroup_matrix and thread_elements() are per lane (no lane needs another's data).
//   - simdgroup_load(d, src, elements_per_row = 8, matrix_origin = 0, transpose_matrix = false): element (r, c) of d
//     is src[(y + r) * elements_per_row + x + c], or with transpose_matrix src[(y + c) * elements_per_row + x + r],
//     for matrix_origin = (x, y) -- the origin counted in memory, before the transpose (the model's reading; Iron
//     always passes 0). simdgroup_store writes the same positions. Elements move bit for bit.
//   - simdgroup_multiply_accumulate(d, a, b, c): d(r, n) = c(r, n) + sum over k = 0..7 of a(r, k) b(k, n), computed
//     in float: the operands are widened to float (exact for half and bfloat), the sum starts from c(r, n) and adds
//     one product at a time in k order with a float fma (one rounding per step; the product of two half or bfloat
//     values is exact in float, so that is also a float multiply and add), and the result is rounded once to d's
//     type. Apple's hardware order is not documented; Iron's tolerances allow any f32 accumulation order.
//     a and b may differ in type; c and d have the same type.
// Not modelled: other shapes than 8 x 8, the diagonal constructor simdgroup_matrix(T), simdgroup_multiply, and
// vector types of bfloat (a bfloat matrix's thread_elements() is a pair of bfloat values here).
#ifndef IRON_METAL_SIMDGROUP_MATRIX_H
#define IRON_METAL_SIMDGROUP_MATRIX_H

namespace metal {

// bfloat has no vector types in this model: the two elements a lane holds of a bfloat matrix
struct iron_model_bfloat_pair {
    bfloat v[2];
    bfloat& operator[](int i) { return v[i]; }
    const bfloat& operator[](int i) const { return v[i]; }
};

template <typename T>
struct iron_model_matrix_elements {};
template <>
struct iron_model_matrix_elements<float> {
    typedef float2 type;
};
template <>
struct iron_model_matrix_elements<half> {
    typedef half2 type;
};
template <>
struct iron_model_matrix_elements<bfloat> {
    typedef iron_model_bfloat_pair type;
};

template <typename T, int Cols, int Rows>
struct simdgroup_matrix {
    static_assert(Cols == 8 && Rows == 8, "the model of Metal implements 8 x 8 SIMD-group matrices only");
    typedef typename iron_model_matrix_elements<T>::type elements_type;
    elements_type elements;  // this lane's two elements (see the layout above)
    elements_type& thread_elements() { return elements; }
    const elements_type& thread_elements() const { return elements; }
};
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<bfloat, 8, 8> simdgroup_bfloat8x8;

template <typename T, int Cols, int Rows>
simdgroup_matrix<T, Cols, Rows> make_filled_simdgroup_matrix(const T value) {
    simdgroup_matrix<T, Cols, Rows> m;
    m.elements[0] = value;
    m.elements[1] = value;
    return m;
}

// One lane's part of a SIMD-group matrix operation, handed to the driver.
enum iron_model_matrix_kind { IRON_MODEL_MATRIX_LOAD = 1, IRON_MODEL_MATRIX_STORE, IRON_MODEL_MATRIX_MMA };
struct iron_model_matrix_call {
    int kind;
    // load and store: the matrix in memory (the same in every lane) and this lane's two elements
    const volatile void* memory;
    unsigned elem_size;
    ulong elements_per_row, origin_x, origin_y;
    bool transpose;
    void* elements;
    // multiply_accumulate: this lane's elements of a, b and c in float; d comes back in float
    float a[2], b[2], c[2], d[2];
};
// The collective (metal_driver.h): returns once every lane of the SIMD-group called it and the operation is done.
void iron_model_simdgroup_matrix(iron_model_matrix_call& call);

inline float iron_model_widen(float x) { return x; }
inline float iron_model_widen(half x) { return (float)x; }
inline float iron_model_widen(bfloat x) { return (float)x; }
template <typename T>
T iron_model_narrow(float x);  // rounding to nearest even, as Metal's conversions
template <>
inline float iron_model_narrow<float>(float x) { return x; }
template <>
inline half iron_model_narrow<half>(float x) { return (half)x; }
template <>
inline bfloat iron_model_narrow<bfloat>(float x) { return bfloat(x); }

template <typename T, int Cols, int Rows>
void iron_model_matrix_memory(int kind, simdgroup_matrix<T, Cols, Rows>& m, const volatile T* memory,
                              ulong elements_per_row, ulong2 matrix_origin, bool transpose_matrix) {
    iron_model_matrix_call call = {};
    call.kind = kind;
    call.memory = memory;
    call.elem_size = (unsigned)sizeof(T);
    call.elements_per_row = elements_per_row;
    call.origin_x = matrix_origin.x;
    call.origin_y = matrix_origin.y;
    call.transpose = transpose_matrix;
    call.elements = &m.elements;
    iron_model_simdgroup_matrix(call);
}

// device and threadgroup memory: the model's address spaces are qualifiers (threadgroup = volatile), so one template
// takes both; the matrix's and the memory's element types must agree, as in Metal
template <typename T, int Cols, int Rows>
void simdgroup_load(simdgroup_matrix<T, Cols, Rows>& d, const volatile T* src, ulong elements_per_row = Cols,
                    ulong2 matrix_origin = 0, bool transpose_matrix = false) {
    iron_model_matrix_memory(IRON_MODEL_MATRIX_LOAD, d, src, elements_per_row, matrix_origin, transpose_matrix);
}

template <typename T, int Cols, int Rows>
void simdgroup_store(const simdgroup_matrix<T, Cols, Rows>& a, volatile T* dst, ulong elements_per_row = Cols,
                     ulong2 matrix_origin = 0, bool transpose_matrix = false) {
    iron_model_matrix_memory(IRON_MODEL_MATRIX_STORE, const_cast<simdgroup_matrix<T, Cols, Rows>&>(a), dst,
                             elements_per_row, matrix_origin, transpose_matrix);
}

template <typename T, typename U, typename V>
void simdgroup_multiply_accumulate(simdgroup_matrix<T, 8, 8>& d, const simdgroup_matrix<U, 8, 8>& a,
                                   const simdgroup_matrix<V, 8, 8>& b, const simdgroup_matrix<T, 8, 8>& c) {
    iron_model_matrix_call call = {};
    call.kind = IRON_MODEL_MATRIX_MMA;
    for (int e = 0; e < 2; ++e) {
        call.a[e] = iron_model_widen(a.elements[e]);
        call.b[e] = iron_model_widen(b.elements[e]);
        call.c[e] = iron_model_widen(c.elements[e]);
    }
    iron_model_simdgroup_matrix(call);
    for (int e = 0; e < 2; ++e) d.elements[e] = iron_model_narrow<T>(call.d[e]);
}

}  // namespace metal

#endif  // IRON_METAL_SIMDGROUP_MATRIX_H
