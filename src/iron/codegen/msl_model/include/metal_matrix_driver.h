// metal_matrix_driver.h -- the collective behind the model's SIMD-group matrices (metal_simdgroup_matrix.h), part of
// the execution driver (included by metal_driver.h after its collectives).
//
// The lanes of a SIMD-group meet at iron_model_simdgroup_matrix like at a simd_* call. Once none of them runs, the
// one resolving the meeting checks that all 32 lanes are there with the same operation and arguments (else the
// launch fails with the reason), then performs the operation for the whole group: loads and stores move each lane's
// two elements between memory and that lane's matrix; multiply_accumulate gathers the three 8 x 8 operands from
// the lanes' elements and hands each lane its two elements of the result. The layout and the arithmetic are
// documented in metal_simdgroup_matrix.h.
#ifndef IRON_METAL_MATRIX_DRIVER_H
#define IRON_METAL_MATRIX_DRIVER_H

namespace iron_model {

const int MATRIX = 100;  // the collective's op code (after enum Op's)

// the element (row, column) that lane `lane` holds in thread_elements()[0]; [1] is the next column
inline unsigned matrix_row(unsigned lane) { return 4 * (lane / 16) + (lane / 2) % 4; }
inline unsigned matrix_col(unsigned lane) { return 4 * ((lane / 8) % 2) + 2 * (lane % 2); }

inline const char* matrix_name(int kind) {
    return kind == metal::IRON_MODEL_MATRIX_LOAD    ? "simdgroup_load"
           : kind == metal::IRON_MODEL_MATRIX_STORE ? "simdgroup_store"
                                                    : "simdgroup_multiply_accumulate";
}

inline bool same_arguments(const metal::iron_model_matrix_call& a, const metal::iron_model_matrix_call& b) {
    if (a.kind != b.kind) return false;
    if (a.kind == metal::IRON_MODEL_MATRIX_MMA) return true;
    return a.memory == b.memory && a.elem_size == b.elem_size && a.elements_per_row == b.elements_per_row &&
           a.origin_x == b.origin_x && a.origin_y == b.origin_y && a.transpose == b.transpose;
}

// Loads and stores: lane i's element e is the matrix's (row, col + e), at this address
inline unsigned char* matrix_address(const metal::iron_model_matrix_call& c, unsigned row, unsigned col) {
    const metal::ulong r = c.transpose ? col : row, k = c.transpose ? row : col;
    const metal::ulong index = (c.origin_y + r) * c.elements_per_row + c.origin_x + k;
    return (unsigned char*)const_cast<void*>(c.memory) + index * c.elem_size;
}

inline void matrix_mma(metal::iron_model_matrix_call* const* calls) {
    float a[8][8], b[8][8], c[8][8];
    for (unsigned l = 0; l < 32; ++l) {
        for (unsigned e = 0; e < 2; ++e) {
            a[matrix_row(l)][matrix_col(l) + e] = calls[l]->a[e];
            b[matrix_row(l)][matrix_col(l) + e] = calls[l]->b[e];
            c[matrix_row(l)][matrix_col(l) + e] = calls[l]->c[e];
        }
    }
    for (unsigned l = 0; l < 32; ++l) {
        for (unsigned e = 0; e < 2; ++e) {
            const unsigned r = matrix_row(l), n = matrix_col(l) + e;
            float acc = c[r][n];
            for (unsigned k = 0; k < 8; ++k) acc = __builtin_fmaf(a[r][k], b[k][n], acc);
            calls[l]->d[e] = acc;
        }
    }
}

inline void resolve_matrix(Group& g, const std::vector<unsigned>& lanes) {
    const unsigned base = lanes[0] / g.width * g.width, s = lanes[0] / g.width;
    const unsigned members = (base + g.width < g.size ? base + g.width : g.size) - base;
    metal::iron_model_matrix_call* calls[32];
    const int kind = load<metal::iron_model_matrix_call*>(g.lanes[lanes[0]].value)->kind;
    if (g.width != 32 || members != 32) {
        g.fail(std::string(matrix_name(kind)) + ": SIMD-group matrices need SIMD-groups of 32 lanes, as on Apple "
               "GPUs; SIMD-group " + std::to_string(s) + " has " + std::to_string(members) +
               (g.width != 32 ? " (IRON_MSL_CPU_SIMD_WIDTH=" + std::to_string(g.width) + ")" : ""));
        return;
    }
    if (lanes.size() != 32) {
        g.fail(std::string(matrix_name(kind)) + " reached by " + std::to_string(lanes.size()) + " of the 32 lanes "
               "of SIMD-group " + std::to_string(s) + ": Metal requires the whole SIMD-group (uniform control flow)");
        return;
    }
    for (unsigned j : lanes) calls[j - base] = load<metal::iron_model_matrix_call*>(g.lanes[j].value);
    for (unsigned l = 1; l < 32; ++l) {
        if (!same_arguments(*calls[0], *calls[l])) {
            g.fail(std::string(matrix_name(kind)) + ": lane " + std::to_string(l) + " of SIMD-group " +
                   std::to_string(s) + " called " + matrix_name(calls[l]->kind) + " with other arguments than lane "
                   "0: Metal requires the same operation and arguments in every lane");
            return;
        }
    }
    if (kind == metal::IRON_MODEL_MATRIX_MMA) {
        matrix_mma(calls);
        return;
    }
    for (unsigned l = 0; l < 32; ++l) {
        const metal::iron_model_matrix_call& c = *calls[l];
        for (unsigned e = 0; e < 2; ++e) {
            unsigned char* mem = matrix_address(c, matrix_row(l), matrix_col(l) + e);
            unsigned char* mine = static_cast<unsigned char*>(c.elements) + e * c.elem_size;
            if (kind == metal::IRON_MODEL_MATRIX_LOAD) {
                memcpy(mine, mem, c.elem_size);
            } else {
                memcpy(mem, mine, c.elem_size);
            }
        }
    }
}

}  // namespace iron_model

namespace metal {

__attribute__((noinline)) void iron_model_simdgroup_matrix(iron_model_matrix_call& call) {
    iron_model::collective<iron_model_matrix_call*>(__builtin_return_address(0), iron_model::MATRIX,
                                                     iron_model::resolve_matrix, &call, 0);
}

}  // namespace metal

#endif  // IRON_METAL_MATRIX_DRIVER_H
