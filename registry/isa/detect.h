/*
 * The running CPU as a node, the way glibc decides it: x86-64 CPUID plus XGETBV (a feature counts only when the OS
 * saves its registers), arm64 getauxval(AT_HWCAP/AT_HWCAP2). Never /proc/cpuinfo: qemu-user passes the host's
 * through, while CPUID and auxv are what a simulated CPU changes.
 */
#ifndef BERTH_ISA_DETECT_H
#define BERTH_ISA_DETECT_H

#include "registry/isa/isa.h"

/** 0, or -1 on an architecture Berth does not know. */
int berth_isa_detect(berth_isa_node_t *out);

#endif
