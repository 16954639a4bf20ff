// The AVX2 loops are compiled twice (BUILD.bazel): with AVX2_COPTS for
// Isa::kAvx2, and with AVXVNNI_COPTS for Isa::kAvxVnni, where the 4-byte
// dots take one vpdpbusd (avx2_inline.h: DotBytes). WASTE_AVX2_NS names the
// namespace of the build a translation unit belongs to, so that the two
// builds' functions (and inline helpers) never share a symbol. Every other
// translation unit (the AVX-512 files, which call the AVX2 tail loops) is
// compiled without AVX-VNNI and sees avx2.
// Internal to daemon/kernels.
#ifndef WASTE_DAEMON_KERNELS_AVX2_VARIANT_H_
#define WASTE_DAEMON_KERNELS_AVX2_VARIANT_H_

#ifdef __AVXVNNI__
#define WASTE_AVX2_NS avxvnni
#else
#define WASTE_AVX2_NS avx2
#endif

#endif  // WASTE_DAEMON_KERNELS_AVX2_VARIANT_H_
