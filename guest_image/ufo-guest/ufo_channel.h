/* SPDX-License-Identifier: GPL-2.0 */
/*
 * UFO guest/host channel ABI, version 1.
 *
 * Generated from ufo_agent/channel/layout.py by
 * "python -m ufo_agent.channel.gen_header": do not edit.
 * All fields are little-endian. The host writes only the host
 * area, the guest only the guest area; each area has a seqlock.
 */
#ifndef UFO_CHANNEL_H
#define UFO_CHANNEL_H

#include <linux/types.h>

#define UFO_ABI_VERSION 1
#define UFO_PAGE_SIZE 4096
#define UFO_HOST_MAGIC 0x484f4655U
#define UFO_GUEST_MAGIC 0x474f4655U
#define UFO_MASK_CPUS 256
#define UFO_MASK_WORDS 4
#define UFO_HOST_OFFSET 0
#define UFO_HOST_SIZE 128
#define UFO_GUEST_OFFSET 128
#define UFO_GUEST_SIZE 192
#define UFO_GUEST_FLAG_HOST_VALID 0x1U
#define UFO_GUEST_FLAG_WATCHDOG 0x2U
#define UFO_GUEST_FLAG_APPLYING 0x4U
#define UFO_GUEST_FLAG_SCHED_IN 0x8U
#define UFO_GUEST_FLAG_LATENCY 0x10U

struct ufo_host_area {
	/* HOST_MAGIC once the host set up the page */
	__le32 magic;
	/* ABI_VERSION of the host writer */
	__le32 abi_version;
	/* host seqlock: odd while the host writes */
	__le32 seq;
	/* host flags, zero in ABI 1 */
	__le32 flags;
	/* changes at least every second while the host agent lives */
	__le64 heartbeat;
	/* number of vCPUs the guest should keep online */
	__le32 target_vcpus;
	/* incremented by the host with every new target */
	__le32 target_seq;
	/* vCPUs of the domain as the host knows it (informative) */
	__le32 max_vcpus;
	/* zero */
	__le32 reserved0;
	/* zero, room to grow */
	__le64 reserved[11];
};

struct ufo_guest_area {
	/* GUEST_MAGIC once the module bound */
	__le32 magic;
	/* ABI_VERSION of the guest module */
	__le32 abi_version;
	/* guest seqlock: odd while the guest writes */
	__le32 seq;
	/* GUEST_FLAG_* bits */
	__le32 flags;
	/* target_seq of the last target the guest applied */
	__le32 ack_target_seq;
	/* online vCPUs after applying that target (clamped) */
	__le32 applied_target;
	/* vCPUs online now */
	__le32 online_vcpus;
	/* vCPUs present in the guest */
	__le32 present_vcpus;
	/* number of statistics samples published */
	__le64 sample_count;
	/* guest CLOCK_MONOTONIC at the end of the sample interval */
	__le64 timestamp_ns;
	/* length of the sample interval */
	__le64 interval_ns;
	/*
	 * busy time of online vCPUs over the interval, in hundredths of a
	 * percent of one vCPU (0..10000 * online_vcpus)
	 */
	__le32 util;
	/* steal time over the interval, same unit as util */
	__le32 steal;
	/* context switches per second, without the module's own */
	__le64 ctxsw_per_sec;
	/* context switches per second of the module's own thread */
	__le64 own_ctxsw_per_sec;
	/* bit n of word n / 64 set when vCPU n is online */
	__le64 online_mask[4];
	/* host-area values the guest rejected or clamped */
	__le32 host_errors;
	/* times the stale-heartbeat watchdog onlined every vCPU */
	__le32 watchdog_fires;
	/*
	 * switches into a thread other than the idle task, per second,
	 * without the module's own (with GUEST_FLAG_SCHED_IN; zero without
	 * it)
	 */
	__le64 sched_in_per_sec;
	/*
	 * tail latency software in the guest last published, in
	 * microseconds (with GUEST_FLAG_LATENCY; zero without it)
	 */
	__le32 latency_us;
	/* incremented by the guest with every latency_us it publishes */
	__le32 latency_seq;
	/* zero, room to grow */
	__le64 reserved[7];
};

struct ufo_channel_page {
	struct ufo_host_area host;
	struct ufo_guest_area guest;
	/* zero, room to grow */
	__u8 reserved[3776];
};

#endif /* UFO_CHANNEL_H */
