/* SPDX-License-Identifier: MIT */
#ifndef CPA_WL_LIB_H
#define CPA_WL_LIB_H

#include <stdint.h>

uint64_t wl_lib_spin(uint64_t n, uint64_t seed);
uint64_t wl_lib_work(uint64_t n, uint64_t seed);

#endif
