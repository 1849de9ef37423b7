// SPDX-License-Identifier: GPL-2.0
/*
 * ufo_guest - guest side of UFO core management (NSDI'24, section 4.6).
 *
 * Binds to an ivshmem-plain PCI device whose shared page carries the UFO
 * host magic. A kernel thread publishes the guest's CPU utilization and
 * context-switch rates into the page every second and keeps as many vCPUs
 * online as the host asks for. Everything the host writes is untrusted.
 * The scheduling frequency UFO reads is the rate of switches into a
 * thread: a switch into the idle task schedules no work, and counting it
 * makes threads that hand work over on a busy vCPU look half as busy.
 *
 * Software in the guest may publish its tail latency through
 * /sys/kernel/ufo/latency_us; the thread copies it to the page.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cpu.h>
#include <linux/cpumask.h>
#include <linux/debugfs.h>
#include <linux/io.h>
#include <linux/kernel_stat.h>
#include <linux/kobject.h>
#include <linux/kthread.h>
#include <linux/ktime.h>
#include <linux/math64.h>
#include <linux/minmax.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/pci.h>
#include <linux/percpu.h>
#include <linux/sched.h>
#include <linux/seq_file.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <linux/tick.h>
#include <linux/tracepoint.h>

#include "ufo_channel.h"

#define UFO_PCI_VENDOR 0x1af4
#define UFO_PCI_DEVICE 0x1110
#define UFO_SHM_BAR 2
#define UFO_READ_TRIES 8
/* Bounds of a published latency: what the host accepts. */
#define UFO_LATENCY_MIN_US 1U
#define UFO_LATENCY_MAX_US 10000000U

static unsigned int poll_ms = 20;
module_param(poll_ms, uint, 0644);
MODULE_PARM_DESC(poll_ms, "Host target poll interval in ms (1-1000, default 20)");

static unsigned int sample_ms = 1000;
module_param(sample_ms, uint, 0644);
MODULE_PARM_DESC(sample_ms, "Statistics interval in ms (100-60000, default 1000)");

static unsigned int watchdog_ms = 5000;
module_param(watchdog_ms, uint, 0644);
MODULE_PARM_DESC(watchdog_ms,
		 "Online every vCPU when the host heartbeat is older (ms, 100-3600000, default 5000)");

/* What the guest last published; copied to the page under the seqlock. */
struct ufo_pub {
	u32 flags;
	u32 ack_target_seq;
	u32 applied_target;
	u32 online;
	u32 present;
	u64 sample_count;
	u64 timestamp_ns;
	u64 interval_ns;
	u32 util;
	u32 steal;
	u64 ctxsw;
	u64 own_ctxsw;
	u64 sched_in;
	u64 mask[UFO_MASK_WORDS];
	u32 host_errors;
	u32 watchdog_fires;
	u32 latency_us;
	u32 latency_seq;
};

/* A consistent copy of the host area. */
struct ufo_host_snap {
	u32 magic;
	u32 abi_version;
	u64 heartbeat;
	u32 target;
	u32 target_seq;
};

struct ufo_state {
	struct mutex lock;	/* protects page, pdev, generation, pub */
	struct ufo_channel_page *page;
	struct pci_dev *pdev;
	unsigned long generation;
	struct ufo_pub pub;
	u32 guest_seq;
	/* A latency was written that the page does not show yet. */
	bool latency_dirty;

	/* Owned by the thread, read by debugfs under the lock. */
	bool host_valid;
	bool watchdog;
	/*
	 * The heartbeat changed since binding: a host writes the page. The
	 * first one read may be a dead writer's (an agent gone, the source
	 * host of a migration): its target is not followed before this.
	 */
	bool host_alive;
	bool heartbeat_read;
	u64 heartbeat;
	u64 heartbeat_seen_ns;
	u32 host_target;
	u32 host_target_seq;
};

static struct ufo_state ufo;
static struct task_struct *ufo_task;
static struct tracepoint *ufo_tp_switch;
static struct dentry *ufo_debugfs;
static struct kobject *ufo_kobj;

static DEFINE_PER_CPU(u64, ufo_switches);
static DEFINE_PER_CPU(u64, ufo_own_switches);
static DEFINE_PER_CPU(u64, ufo_sched_ins);
static DEFINE_PER_CPU(u64, ufo_prev_busy);
static DEFINE_PER_CPU(u64, ufo_prev_steal);

static void ufo_probe_switch(void *data, bool preempt,
			     struct task_struct *prev,
			     struct task_struct *next,
			     unsigned int prev_state)
{
	struct task_struct *self = READ_ONCE(ufo_task);

	/* Our own polling must not look like guest scheduling activity. */
	if (prev == self || next == self) {
		this_cpu_inc(ufo_own_switches);
		return;
	}
	this_cpu_inc(ufo_switches);
	if (!is_idle_task(next))
		this_cpu_inc(ufo_sched_ins);
}

static void ufo_find_tp(struct tracepoint *tp, void *priv)
{
	if (!strcmp(tp->name, "sched_switch"))
		*(struct tracepoint **)priv = tp;
}

static void ufo_cpu_times(int cpu, u64 *busy, u64 *steal)
{
	struct kernel_cpustat kcs;
	u64 *t = kcs.cpustat;

	/* Same sources and sums as /proc/stat (guest time is in user). */
	kcpustat_cpu_fetch(&kcs, cpu);
	*busy = t[CPUTIME_USER] + t[CPUTIME_NICE] + t[CPUTIME_SYSTEM] +
		t[CPUTIME_IRQ] + t[CPUTIME_SOFTIRQ];
	*steal = t[CPUTIME_STEAL];
}

static void ufo_sum_switches(u64 *other, u64 *own, u64 *in)
{
	int cpu;

	*other = 0;
	*own = 0;
	*in = 0;
	for_each_possible_cpu(cpu) {
		*other += per_cpu(ufo_switches, cpu);
		*own += per_cpu(ufo_own_switches, cpu);
		*in += per_cpu(ufo_sched_ins, cpu);
	}
}

static void ufo_fill_cpus(struct ufo_pub *p)
{
	int cpu;

	memset(p->mask, 0, sizeof(p->mask));
	for_each_online_cpu(cpu) {
		if (cpu < UFO_MASK_CPUS)
			p->mask[cpu / 64] |= 1ULL << (cpu % 64);
	}
	p->online = num_online_cpus();
	p->present = num_present_cpus();
}

/* Called with ufo.lock held and ufo.page set. */
static void ufo_publish_locked(void)
{
	struct ufo_guest_area *g = &ufo.page->guest;
	struct ufo_pub *p = &ufo.pub;
	int i;

	ufo.guest_seq = (ufo.guest_seq | 1);
	WRITE_ONCE(g->seq, cpu_to_le32(ufo.guest_seq));
	/* Odd sequence visible before the fields change. */
	smp_wmb();
	WRITE_ONCE(g->magic, cpu_to_le32(UFO_GUEST_MAGIC));
	WRITE_ONCE(g->abi_version, cpu_to_le32(UFO_ABI_VERSION));
	WRITE_ONCE(g->flags, cpu_to_le32(p->flags));
	WRITE_ONCE(g->ack_target_seq, cpu_to_le32(p->ack_target_seq));
	WRITE_ONCE(g->applied_target, cpu_to_le32(p->applied_target));
	WRITE_ONCE(g->online_vcpus, cpu_to_le32(p->online));
	WRITE_ONCE(g->present_vcpus, cpu_to_le32(p->present));
	WRITE_ONCE(g->sample_count, cpu_to_le64(p->sample_count));
	WRITE_ONCE(g->timestamp_ns, cpu_to_le64(p->timestamp_ns));
	WRITE_ONCE(g->interval_ns, cpu_to_le64(p->interval_ns));
	WRITE_ONCE(g->util, cpu_to_le32(p->util));
	WRITE_ONCE(g->steal, cpu_to_le32(p->steal));
	WRITE_ONCE(g->ctxsw_per_sec, cpu_to_le64(p->ctxsw));
	WRITE_ONCE(g->own_ctxsw_per_sec, cpu_to_le64(p->own_ctxsw));
	WRITE_ONCE(g->sched_in_per_sec, cpu_to_le64(p->sched_in));
	for (i = 0; i < UFO_MASK_WORDS; i++)
		WRITE_ONCE(g->online_mask[i], cpu_to_le64(p->mask[i]));
	WRITE_ONCE(g->host_errors, cpu_to_le32(p->host_errors));
	WRITE_ONCE(g->watchdog_fires, cpu_to_le32(p->watchdog_fires));
	WRITE_ONCE(g->latency_us, cpu_to_le32(p->latency_us));
	WRITE_ONCE(g->latency_seq, cpu_to_le32(p->latency_seq));
	ufo.latency_dirty = false;
	/* Fields visible before the even sequence. */
	smp_wmb();
	ufo.guest_seq++;
	WRITE_ONCE(g->seq, cpu_to_le32(ufo.guest_seq));
}

static void ufo_publish(void)
{
	mutex_lock(&ufo.lock);
	ufo_fill_cpus(&ufo.pub);
	if (ufo.page)
		ufo_publish_locked();
	mutex_unlock(&ufo.lock);
}

/* Seqlock read of the host area; -EAGAIN when it keeps changing. */
static int ufo_read_host(struct ufo_host_area *h, struct ufo_host_snap *s)
{
	u32 seq;
	int i;

	for (i = 0; i < UFO_READ_TRIES; i++) {
		seq = le32_to_cpu(READ_ONCE(h->seq));
		if (seq & 1) {
			cpu_relax();
			continue;
		}
		/* Pairs with the host's write of an even sequence. */
		smp_rmb();
		s->magic = le32_to_cpu(READ_ONCE(h->magic));
		s->abi_version = le32_to_cpu(READ_ONCE(h->abi_version));
		s->heartbeat = le64_to_cpu(READ_ONCE(h->heartbeat));
		s->target = le32_to_cpu(READ_ONCE(h->target_vcpus));
		s->target_seq = le32_to_cpu(READ_ONCE(h->target_seq));
		/* Fields read before the sequence is checked again. */
		smp_rmb();
		if (le32_to_cpu(READ_ONCE(h->seq)) == seq)
			return 0;
	}
	return -EAGAIN;
}

static void ufo_online_all(void)
{
	int cpu, ret;

	for_each_present_cpu(cpu) {
		if (cpu_online(cpu))
			continue;
		ret = add_cpu(cpu);
		if (ret)
			pr_warn("cannot online CPU %d: %d\n", cpu, ret);
	}
}

static unsigned int ufo_highest_offlinable(void)
{
	unsigned int cpu, last = 0;

	for_each_online_cpu(cpu)
		last = cpu;
	return last;	/* 0 means none: CPU0 is never offlined */
}

static unsigned int ufo_lowest_offline(void)
{
	unsigned int cpu;

	for_each_present_cpu(cpu) {
		if (!cpu_online(cpu))
			return cpu;
	}
	return nr_cpu_ids;
}

static void ufo_apply(unsigned int target)
{
	unsigned int cpu;

	while (num_online_cpus() > target && !kthread_should_stop()) {
		cpu = ufo_highest_offlinable();
		if (!cpu || remove_cpu(cpu))
			break;
	}
	while (num_online_cpus() < target && !kthread_should_stop()) {
		cpu = ufo_lowest_offline();
		if (cpu >= nr_cpu_ids || add_cpu(cpu))
			break;
	}
}

static void ufo_set_flag(u32 flag, bool on)
{
	if (on)
		ufo.pub.flags |= flag;
	else
		ufo.pub.flags &= ~flag;
}

/* Per-binding state of the thread. */
struct ufo_run {
	unsigned long generation;
	bool attached;
	bool reapply;
	u64 next_sample_ns;
	u64 last_sample_ns;
	u64 prev_switches;
	u64 prev_own;
	u64 prev_in;
};

static void ufo_stats_reset(struct ufo_run *r, u64 now)
{
	int cpu;
	u64 busy, steal;

	for_each_possible_cpu(cpu) {
		ufo_cpu_times(cpu, &busy, &steal);
		per_cpu(ufo_prev_busy, cpu) = busy;
		per_cpu(ufo_prev_steal, cpu) = steal;
	}
	ufo_sum_switches(&r->prev_switches, &r->prev_own, &r->prev_in);
	r->last_sample_ns = now;
}

static void ufo_sample(struct ufo_run *r, u64 now)
{
	u64 busy_sum = 0, steal_sum = 0, busy, steal, sw, own, in, dt, cap;
	int cpu;

	for_each_possible_cpu(cpu) {
		ufo_cpu_times(cpu, &busy, &steal);
		if (busy > per_cpu(ufo_prev_busy, cpu))
			busy_sum += busy - per_cpu(ufo_prev_busy, cpu);
		if (steal > per_cpu(ufo_prev_steal, cpu))
			steal_sum += steal - per_cpu(ufo_prev_steal, cpu);
		per_cpu(ufo_prev_busy, cpu) = busy;
		per_cpu(ufo_prev_steal, cpu) = steal;
	}
	ufo_sum_switches(&sw, &own, &in);
	dt = max_t(u64, now - r->last_sample_ns, 1);
	cap = 10000ULL * num_online_cpus();

	mutex_lock(&ufo.lock);
	ufo.pub.interval_ns = dt;
	ufo.pub.timestamp_ns = now;
	ufo.pub.util = min(div64_u64(busy_sum * 10000, dt), cap);
	ufo.pub.steal = min(div64_u64(steal_sum * 10000, dt), cap);
	ufo.pub.ctxsw = div64_u64((sw - r->prev_switches) * NSEC_PER_SEC, dt);
	ufo.pub.own_ctxsw = div64_u64((own - r->prev_own) * NSEC_PER_SEC, dt);
	/* A subset of the switches above: never more, as the host checks. */
	ufo.pub.sched_in = min(div64_u64((in - r->prev_in) * NSEC_PER_SEC, dt),
			       ufo.pub.ctxsw);
	ufo_set_flag(UFO_GUEST_FLAG_SCHED_IN, true);
	ufo.pub.sample_count++;
	mutex_unlock(&ufo.lock);

	r->prev_switches = sw;
	r->prev_own = own;
	r->prev_in = in;
	r->last_sample_ns = now;
	ufo_publish();
}

/* Reads and judges the host area; returns true when a target must be applied. */
static bool ufo_poll_host(struct ufo_run *r, u64 now, u32 *target, u32 *seq)
{
	struct ufo_host_snap s;
	unsigned int wd = clamp(READ_ONCE(watchdog_ms), 100U, 3600000U);
	unsigned int present = num_present_cpus();
	bool valid, fire = false, apply = false;
	int ret;

	mutex_lock(&ufo.lock);
	if (!ufo.page) {
		mutex_unlock(&ufo.lock);
		return false;
	}
	ret = ufo_read_host(&ufo.page->host, &s);
	valid = !ret && s.magic == UFO_HOST_MAGIC &&
		s.abi_version == UFO_ABI_VERSION;
	if (ufo.host_valid && !valid)
		ufo.pub.host_errors++;
	ufo.host_valid = valid;
	ufo_set_flag(UFO_GUEST_FLAG_HOST_VALID, valid);

	if (valid && s.heartbeat != ufo.heartbeat) {
		if (ufo.heartbeat_read)
			ufo.host_alive = true;
		ufo.heartbeat_read = true;
		ufo.heartbeat = s.heartbeat;
		ufo.heartbeat_seen_ns = now;
		if (ufo.watchdog) {
			/* The host is back: follow its target again. */
			ufo.watchdog = false;
			r->reapply = true;
			ufo_set_flag(UFO_GUEST_FLAG_WATCHDOG, false);
		}
	}
	if (!ufo.watchdog &&
	    now - ufo.heartbeat_seen_ns > (u64)wd * NSEC_PER_MSEC) {
		ufo.watchdog = true;
		ufo.pub.watchdog_fires++;
		ufo_set_flag(UFO_GUEST_FLAG_WATCHDOG, true);
		fire = true;
	}
	if (valid && !ufo.watchdog && ufo.host_alive && s.target_seq &&
	    (s.target_seq != ufo.pub.ack_target_seq || r->reapply)) {
		/* Seq going backwards: a host restart or garbage; count it. */
		if ((s32)(s.target_seq - ufo.pub.ack_target_seq) < 0)
			ufo.pub.host_errors++;
		if (s.target < 1 || s.target > present)
			ufo.pub.host_errors++;
		*target = clamp(s.target, 1U, present);
		*seq = s.target_seq;
		ufo.host_target = s.target;
		ufo.host_target_seq = s.target_seq;
		ufo_set_flag(UFO_GUEST_FLAG_APPLYING, true);
		r->reapply = false;
		apply = true;
	}
	mutex_unlock(&ufo.lock);

	if (fire) {
		pr_warn("host heartbeat stale for %u ms: onlining every vCPU\n",
			wd);
		ufo_online_all();
		ufo_publish();
	}
	return apply;
}

static void ufo_ack(u32 seq)
{
	mutex_lock(&ufo.lock);
	ufo.pub.ack_target_seq = seq;
	ufo.pub.applied_target = num_online_cpus();
	ufo_set_flag(UFO_GUEST_FLAG_APPLYING, false);
	mutex_unlock(&ufo.lock);
	ufo_publish();
}

/* Detects a new binding or an unbinding of the device. */
static void ufo_check_binding(struct ufo_run *r, u64 now)
{
	bool attached;
	unsigned long gen;

	mutex_lock(&ufo.lock);
	gen = ufo.generation;
	attached = ufo.page;
	if (gen != r->generation) {
		ufo.heartbeat_seen_ns = now;
		ufo.heartbeat = 0;
		ufo.heartbeat_read = false;
		ufo.host_alive = false;
		ufo.host_valid = false;
		ufo.watchdog = false;
		memset(&ufo.pub, 0, sizeof(ufo.pub));
	}
	mutex_unlock(&ufo.lock);

	if (gen == r->generation)
		return;
	if (r->attached && !attached) {
		pr_info("device gone: onlining every vCPU\n");
		ufo_online_all();
	}
	r->generation = gen;
	r->attached = attached;
	r->reapply = false;
	ufo_stats_reset(r, now);
	r->next_sample_ns = now + (u64)sample_ms * NSEC_PER_MSEC;
	if (attached)
		ufo_publish();
}

static int ufo_thread(void *unused)
{
	struct ufo_run r = { .generation = ~0UL };
	unsigned int poll, period;
	u32 target, seq;
	u64 now;

	while (!kthread_should_stop()) {
		now = ktime_get_ns();
		ufo_check_binding(&r, now);
		if (r.attached) {
			if (ufo_poll_host(&r, now, &target, &seq)) {
				/* Let the host see that the target was taken. */
				ufo_publish();
				ufo_apply(target);
				ufo_ack(seq);
			}
			now = ktime_get_ns();
			if (now >= r.next_sample_ns) {
				period = clamp(READ_ONCE(sample_ms), 100U, 60000U);
				ufo_sample(&r, now);
				r.next_sample_ns += (u64)period * NSEC_PER_MSEC;
				if (r.next_sample_ns <= now)
					r.next_sample_ns = now + (u64)period * NSEC_PER_MSEC;
			}
		}
		/* At most one latency write to the page per poll. */
		if (r.attached && READ_ONCE(ufo.latency_dirty))
			ufo_publish();
		poll = clamp(READ_ONCE(poll_ms), 1U, 1000U);
		schedule_timeout_interruptible(msecs_to_jiffies(poll));
	}
	/* Unload: leave the guest with every vCPU it has. */
	ufo_online_all();
	return 0;
}

static int ufo_state_show(struct seq_file *m, void *v)
{
	struct ufo_pub *p = &ufo.pub;
	int i;

	mutex_lock(&ufo.lock);
	seq_printf(m, "bound %s\n", ufo.pdev ? pci_name(ufo.pdev) : "none");
	seq_printf(m, "host_valid %d\n", ufo.host_valid);
	seq_printf(m, "heartbeat %llu\n", ufo.heartbeat);
	seq_printf(m, "watchdog %d\n", ufo.watchdog);
	seq_printf(m, "host_target %u\n", ufo.host_target);
	seq_printf(m, "host_target_seq %u\n", ufo.host_target_seq);
	seq_printf(m, "ack_target_seq %u\n", p->ack_target_seq);
	seq_printf(m, "applied_target %u\n", p->applied_target);
	seq_printf(m, "online %u\n", num_online_cpus());
	seq_printf(m, "present %u\n", num_present_cpus());
	seq_printf(m, "sample_count %llu\n", p->sample_count);
	seq_printf(m, "util %u\n", p->util);
	seq_printf(m, "steal %u\n", p->steal);
	seq_printf(m, "ctxsw_per_sec %llu\n", p->ctxsw);
	seq_printf(m, "own_ctxsw_per_sec %llu\n", p->own_ctxsw);
	seq_printf(m, "sched_in_per_sec %llu\n", p->sched_in);
	seq_printf(m, "host_errors %u\n", p->host_errors);
	seq_printf(m, "watchdog_fires %u\n", p->watchdog_fires);
	seq_printf(m, "latency_us %u\n", p->latency_us);
	seq_printf(m, "latency_seq %u\n", p->latency_seq);
	seq_puts(m, "online_mask");
	for (i = 0; i < UFO_MASK_WORDS; i++)
		seq_printf(m, " %016llx", p->mask[i]);
	seq_puts(m, "\n");
	mutex_unlock(&ufo.lock);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(ufo_state);

/* The tail latency guest software last published, in microseconds. */
static ssize_t latency_us_show(struct kobject *kobj,
			       struct kobj_attribute *attr, char *buf)
{
	u32 v;

	mutex_lock(&ufo.lock);
	v = ufo.pub.latency_us;
	mutex_unlock(&ufo.lock);
	return sysfs_emit(buf, "%u\n", v);
}

/*
 * Each write is one new report, even of the same value: the host takes a
 * value only while reports keep coming.
 */
static ssize_t latency_us_store(struct kobject *kobj,
				struct kobj_attribute *attr,
				const char *buf, size_t count)
{
	u32 v;
	int ret;

	ret = kstrtou32(buf, 10, &v);
	if (ret)
		return ret;
	if (v < UFO_LATENCY_MIN_US || v > UFO_LATENCY_MAX_US)
		return -ERANGE;
	mutex_lock(&ufo.lock);
	ufo.pub.latency_us = v;
	ufo.pub.latency_seq++;
	ufo_set_flag(UFO_GUEST_FLAG_LATENCY, true);
	ufo.latency_dirty = true;
	mutex_unlock(&ufo.lock);
	return count;
}

static struct kobj_attribute ufo_latency_attr = __ATTR_RW(latency_us);

static int ufo_pci_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct ufo_channel_page *page;
	int ret;

	ret = pci_enable_device_mem(pdev);
	if (ret)
		return ret;
	if (!(pci_resource_flags(pdev, UFO_SHM_BAR) & IORESOURCE_MEM) ||
	    pci_resource_len(pdev, UFO_SHM_BAR) < UFO_PAGE_SIZE) {
		ret = -ENODEV;
		goto err_disable;
	}
	ret = pci_request_region(pdev, UFO_SHM_BAR, KBUILD_MODNAME);
	if (ret)
		goto err_disable;
	page = memremap(pci_resource_start(pdev, UFO_SHM_BAR), UFO_PAGE_SIZE,
			MEMREMAP_WB);
	if (!page) {
		ret = -ENOMEM;
		goto err_release;
	}
	/* Other ivshmem users share the device ID: bind only to ours. */
	if (le32_to_cpu(READ_ONCE(page->host.magic)) != UFO_HOST_MAGIC) {
		dev_info(&pdev->dev, "no UFO host magic, leaving it alone\n");
		ret = -ENODEV;
		goto err_unmap;
	}
	mutex_lock(&ufo.lock);
	if (ufo.page) {
		mutex_unlock(&ufo.lock);
		dev_info(&pdev->dev, "a UFO channel is already bound\n");
		ret = -EBUSY;
		goto err_unmap;
	}
	ufo.page = page;
	ufo.pdev = pdev;
	ufo.generation++;
	mutex_unlock(&ufo.lock);
	pci_set_drvdata(pdev, page);
	dev_info(&pdev->dev, "UFO channel bound\n");
	wake_up_process(ufo_task);
	return 0;

err_unmap:
	memunmap(page);
err_release:
	pci_release_region(pdev, UFO_SHM_BAR);
err_disable:
	pci_disable_device(pdev);
	return ret;
}

static void ufo_pci_remove(struct pci_dev *pdev)
{
	struct ufo_channel_page *page = pci_get_drvdata(pdev);

	mutex_lock(&ufo.lock);
	if (ufo.page == page) {
		/* Tell the host the guest side is gone. */
		ufo.guest_seq |= 1;
		WRITE_ONCE(page->guest.seq, cpu_to_le32(ufo.guest_seq));
		/* Same seqlock protocol as ufo_publish_locked(). */
		smp_wmb();
		WRITE_ONCE(page->guest.magic, 0);
		/* Magic cleared before the even sequence. */
		smp_wmb();
		ufo.guest_seq++;
		WRITE_ONCE(page->guest.seq, cpu_to_le32(ufo.guest_seq));
		ufo.page = NULL;
		ufo.pdev = NULL;
		ufo.generation++;
	}
	mutex_unlock(&ufo.lock);
	/*
	 * The thread onlines the vCPUs: doing it here could deadlock, as
	 * ACPI hot-unplug calls us with the device hotplug lock held.
	 */
	wake_up_process(ufo_task);
	memunmap(page);
	pci_release_region(pdev, UFO_SHM_BAR);
	pci_disable_device(pdev);
}

static const struct pci_device_id ufo_pci_ids[] = {
	{ PCI_DEVICE(UFO_PCI_VENDOR, UFO_PCI_DEVICE) },
	{ }
};
MODULE_DEVICE_TABLE(pci, ufo_pci_ids);

static struct pci_driver ufo_pci_driver = {
	.name = KBUILD_MODNAME,
	.id_table = ufo_pci_ids,
	.probe = ufo_pci_probe,
	.remove = ufo_pci_remove,
};

static int __init ufo_init(void)
{
	struct task_struct *task;
	int ret;

	BUILD_BUG_ON(sizeof(struct ufo_channel_page) != UFO_PAGE_SIZE);
	BUILD_BUG_ON(sizeof(struct ufo_host_area) != UFO_HOST_SIZE);
	BUILD_BUG_ON(sizeof(struct ufo_guest_area) != UFO_GUEST_SIZE);
	BUILD_BUG_ON(offsetof(struct ufo_channel_page, guest) !=
		     UFO_GUEST_OFFSET);

	mutex_init(&ufo.lock);
	for_each_kernel_tracepoint(ufo_find_tp, &ufo_tp_switch);
	if (!ufo_tp_switch) {
		pr_err("sched_switch tracepoint not found\n");
		return -ENOENT;
	}
	task = kthread_create(ufo_thread, NULL, "ufo_guest");
	if (IS_ERR(task))
		return PTR_ERR(task);
	WRITE_ONCE(ufo_task, task);
	ret = tracepoint_probe_register(ufo_tp_switch, ufo_probe_switch, NULL);
	if (ret) {
		kthread_stop(task);
		return ret;
	}
	ufo_debugfs = debugfs_create_dir(KBUILD_MODNAME, NULL);
	debugfs_create_file("state", 0444, ufo_debugfs, NULL, &ufo_state_fops);
	ufo_kobj = kobject_create_and_add("ufo", kernel_kobj);
	ret = ufo_kobj ? sysfs_create_file(ufo_kobj, &ufo_latency_attr.attr) :
		-ENOMEM;
	if (!ret) {
		wake_up_process(task);
		ret = pci_register_driver(&ufo_pci_driver);
	}
	if (ret) {
		kobject_put(ufo_kobj);
		debugfs_remove_recursive(ufo_debugfs);
		kthread_stop(task);
		tracepoint_probe_unregister(ufo_tp_switch, ufo_probe_switch,
					    NULL);
		tracepoint_synchronize_unregister();
		return ret;
	}
	return 0;
}

static void __exit ufo_exit(void)
{
	pci_unregister_driver(&ufo_pci_driver);
	kobject_put(ufo_kobj);
	debugfs_remove_recursive(ufo_debugfs);
	/* No probe may compare against the thread once it is gone. */
	tracepoint_probe_unregister(ufo_tp_switch, ufo_probe_switch, NULL);
	tracepoint_synchronize_unregister();
	/* The thread onlines every vCPU before it exits. */
	kthread_stop(ufo_task);
}

module_init(ufo_init);
module_exit(ufo_exit);

MODULE_DESCRIPTION("UFO guest agent: vCPU count control over an ivshmem page");
MODULE_AUTHOR("ufo-nova developers");
MODULE_LICENSE("GPL");
MODULE_VERSION("1.1.0");
