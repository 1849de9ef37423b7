/*
 * Discrete-event core of the ufo_sim host model.
 *
 * One host: logical CPUs (SMT pairs), a CFS-like host scheduler over host
 * threads (vCPU and emulator threads), and per VM a CFS-like guest
 * scheduler over guest threads on the online vCPUs.  A guest thread only
 * progresses while its vCPU thread runs on a host CPU, so every double
 * scheduling effect comes out of the two schedulers, not out of a formula.
 *
 * Time is integer nanoseconds; remaining work is double nanoseconds of
 * full-speed execution.  The "event queue" is the next-event time of every
 * CPU and every VM's next arrival, scanned linearly: there are few of
 * them and they change on every event, which a heap would not like.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef long long tns;

#define T_INF	LLONG_MAX
#define MAXCPU	64
#define EPS	0.5
/*
 * Livelock guard: this many events in a row at one instant means the
 * model plans something at h->now forever (a bug); advance() raises
 * instead of spinning.  Legitimate runs see at most a few dozen.
 */
#define STUCK_EVENTS	2000000

enum { K_VCPU, K_EMU };
enum { S_SLEEP, S_RUNNABLE, S_RUNNING };
enum { W_IN, W_MID, W_OUT, W_BEIO };
enum { D_EXP, D_LOGNORMAL, D_BIMODAL, D_FIXED };
enum { L_FREE, L_SPIN, L_WAIT, L_HELD };

struct params {
	/*
	 * Work time factor while the SMT sibling is busy: with a thread of
	 * the same VM and kind, of another VM, or when one of the two is an
	 * emulator thread (the shared L1, L2 and TLBs hold both working sets).
	 */
	double smt_slow, smt_cross, smt_emu;
	/* ... while the sibling halt-polls (a PAUSE loop leaves the core) */
	double smt_poll;
	double sw_base;		/* host context switch */
	double sw_vm_in;	/* extra when switching a vCPU in (entry, VMCS) */
	double sw_vm_out;	/* extra when switching a vCPU out (exit) */
	double lat, min_gran, wake_gran;	/* host CFS */
	double g_lat, g_min_gran, g_wake_gran, g_sw;	/* guest CFS */
	double halt_poll;	/* KVM halt polling window */
	int max_outstanding;
	/*
	 * Cache and TLB warmth: a thread switched in on a core where other
	 * threads ran since its last run there owes up to cache_refill of
	 * stall time refilling its working set, paid as it works: its work
	 * runs cold_slowdown times slower until the debt is paid, so a
	 * short burst pays only for what it touches.  Warmth decays with
	 * the others' busy time on that core (cache_decay); a thread of the
	 * same VM and kind (vCPU or emulator) evicts only cache_same_group
	 * of what a foreign one does.
	 */
	double cache_refill, cache_decay, cache_same_group, cold_slow;
	double emu_footprint;	/* emulator working set, share of a full one */
	/*
	 * Share of a vCPU thread's warmth tagged by its own VPID (TLB and
	 * paging-structure caches): the guest's other vCPUs evict it as a
	 * foreign thread does.
	 */
	double vcpu_tlb_share;
	/* emulator thread woken from sleep: eventfd and scheduler wake path */
	double emu_wakeup;
	/* emulator signals the guest's interrupt (irqfd, injection) */
	double irq_inject;
	/*
	 * vhost: one worker per queue pair, a connection's packets on its
	 * queue (0: the emulator threads serve one shared queue); the
	 * interrupt is injected only while the guest's queue interrupt is
	 * enabled (NAPI and the event index; 0: every packet).
	 */
	int emu_queues, irq_coalesce;
	/* guest work of bringing one vCPU online or taking it offline */
	double hotplug;
	/* a lock waiter spins this long, then sleeps until handed the lock */
	double lock_spin;
	/*
	 * Load balancing as in Linux (0: an idle CPU takes any queued
	 * thread at once, a preempted thread moves to an idle CPU): a CPU
	 * going idle pulls work only if its average idle period reaches
	 * migration_cost (newidle_balance), a thread that ran less than
	 * migration_cost ago is cache-hot and stays (task_hot), a
	 * preempted thread stays queued, and idle CPUs pull what waits at
	 * the next balance_tick (nohz idle balance).
	 */
	double migration_cost, balance_tick;
	/*
	 * The guest kernel's load balancing, the same rules (0: a vCPU
	 * going idle takes any queued guest thread at once and a
	 * preempted thread moves to an idle vCPU).
	 */
	double g_mig, g_tick;
};

struct task {			/* host thread */
	int kind, vm, idx, state, cpu;
	uint64_t mask;
	double vr;		/* vruntime; relative to min_vr while asleep */
	tns since;		/* became runnable */
	tns left;		/* last left a CPU */
	int item;		/* emulator: current work item, -1 none */
	double rem;		/* emulator: remaining work */
	int fresh;		/* emulator: woken, has not looked for work */
	double debt;		/* emulator: wake-up work owed before items */
	int idle;		/* SCHED_IDLE class (vCPU threads of a soaking VM) */
	struct gvcpu *g;	/* vCPU: its guest state, not via its VM */
};

struct cpu {
	int curr, sib, core, nq, sw_pending, resched;
	int *q;
	tns last, sw_end, slice_start;
	double debt;		/* curr's cache refill stall still owed */
	double avg_idle;	/* mean idle period (Linux rq->avg_idle) */
	tns idle_since;		/* idle from (-1: busy) */
	tns pull_at;		/* idle: balance at this tick (0: none) */
	double rate, min_vr;
	double speed;		/* work per ns relative to a big core */
	tns busy, ovh, idle;
};

struct fifo {
	int *buf;
	int cap, head, len;
};

struct req {
	tns arr;
	int round, thr;
	uint64_t rng;
};

struct gthr {
	int state, vcpu, req;
	int lk;			/* L_FREE, L_SPIN, L_WAIT (asleep), L_HELD */
	double cs;		/* critical section at the end of this round */
	int hold;		/* request between round trips, -1 none */
	int queue;		/* its connections' virtio-net queue pair */
	int cont;		/* its next query has arrived */
	double rem, vr;
	tns start;
	tns left;		/* last left its vCPU */
};

struct gvcpu {
	int curr, nq, sw, resched;
	int *q;
	double rem, min_vr;
	tns sl_start;
	tns poll_end;		/* halted, KVM polls until then; 0: no */
	tns halted_at;		/* -1: not halted */
	double poll_ns;		/* KVM's adaptive halt-poll window */
	int in_irq;		/* running the virtio-net RX interrupt */
	int hp;			/* running CPU hotplug work (going on/offline) */
	struct fifo irq;	/* requests whose interrupt is pending */
	double avg_idle;	/* mean guest idle period (rq->avg_idle) */
	tns idle_since;		/* guest idle from (-1: running a thread) */
};

struct counters {
	tns vcpu_cpu, vcpu_wait, emu_cpu, emu_wait, guest_busy;
	long long vcpu_slices, host_ctxsw, guest_ctxsw, done, dropped, arrived;
	long long guest_sched_in;	/* switches into a thread, not idle */
	/* KVM's halt statistics: blocks, polls that caught the wake-up */
	long long halts, polls_ok;
	long long emu_wakes, irqs;	/* emulator wake-ups, interrupts sent */
	tns vcpu_poll;		/* vCPU thread CPU spent halt polling */
	tns vcpu_guest;		/* ... in guest mode (Linux's guest time) */
};

struct vm {
	int nvcpu, online, nemu, nthr, be;
	int stopped;		/* shut down: no new work, drains, then sleeps */
	int t_vcpu0, t_emu0;
	struct gvcpu *gv;
	struct gthr *gt;
	/* profile */
	int svc_kind, rounds;
	double svc_mean, svc_a, svc_b, emu_in, emu_out, be_chunk, be_io;
	double irq_cost;	/* guest RX interrupt work per request */
	/*
	 * One guest lock (the application's or the kernel's hottest): this
	 * share of each service round is a critical section at its end;
	 * waiters queue in FIFO order, spin for a while, then sleep, so a
	 * holder preempted on the host stalls every waiter (lock-holder
	 * preemption) without spinning forever.
	 */
	double lock_share;
	int lock_owner;
	double footprint;	/* vCPU working set, share of a full refill */
	double emu_sens;	/* its vCPUs' share of smt_emu's excess */
	struct fifo lockq;
	/*
	 * CPU hotplug under way: the online count asked for, the vCPU in
	 * transit (-1: none) and whether it is going offline.
	 */
	int hp_target, hp_v, hp_down;
	/* load */
	double rps;
	tns next_arr;
	tns g_pull_at;		/* idle vCPUs balance at this tick (0: none) */
	uint64_t rng;
	/* requests */
	struct req *req;
	int nreq_cap, nfree, outstanding;
	int *free;
	struct fifo *tq;	/* per worker: its connections' requests */
	struct fifo *eq;	/* emulator work items: per queue, or eq[0] */
	struct counters c;
	double *lat;
	Py_ssize_t nlat, latcap;
};

typedef struct {
	PyObject_HEAD
	struct params p;
	int ncpu;
	struct cpu cpu[MAXCPU];
	/* Each CPU's next event (T_INF: none), all scanned on every event. */
	tns next_at[MAXCPU];
	uint64_t all_mask;
	struct task *task;
	int ntask;
	struct vm *vm;
	int nvm;
	tns now;
	uint64_t dirty;
	int nidle;		/* threads of the SCHED_IDLE class */
	long long stuck_limit;	/* events at one instant before giving up */
	/*
	 * Cache footprint bookkeeping, per core (index: lower sibling):
	 * polluting busy time in all and per group (2 per VM: vCPU threads,
	 * emulator threads), and each thread's marks of both when it last
	 * left the core (NAN: never ran there).
	 */
	double cum[MAXCPU];
	double *cum_grp;	/* [group * MAXCPU + core] */
	double *mark_all;	/* [task * MAXCPU + core] */
	double *mark_grp;
} Host;

/* ---- random numbers: splitmix64, one stream per VM and per request ---- */

static uint64_t sm64(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static double unif(uint64_t *s)
{
	return ((sm64(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static double rexp(uint64_t *s, double mean)
{
	return -mean * log(unif(s));
}

static double rnorm(uint64_t *s)
{
	double u = unif(s), v = unif(s);

	return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static double draw(uint64_t *s, int kind, double mean, double a, double b)
{
	double sig2, x;

	switch (kind) {
	case D_LOGNORMAL:	/* a: coefficient of variation */
		sig2 = log(1.0 + a * a);
		x = log(mean) - sig2 / 2 + sqrt(sig2) * rnorm(s);
		return exp(x);
	case D_BIMODAL:		/* a: share of long ones, b: long/short */
		x = mean / (1.0 - a + a * b);
		return rexp(s, unif(s) < a ? x * b : x);
	case D_FIXED:
		return mean;
	default:
		return rexp(s, mean);
	}
}

/* ---- small containers ---- */

/* cap is a power of two: the ring indexes with a mask, not a division */
static int fifo_init(struct fifo *f, int cap)
{
	f->buf = PyMem_Calloc(cap, sizeof(int));
	f->cap = cap;
	f->head = 0;
	f->len = 0;
	return f->buf ? 0 : -1;
}

static void fifo_push(struct fifo *f, int v)
{
	if (f->len == f->cap) {
		int *nb = PyMem_Calloc(f->cap * 2, sizeof(int));
		int i;

		if (!nb)
			return;	/* cannot happen below max_outstanding */
		for (i = 0; i < f->len; i++)
			nb[i] = f->buf[(f->head + i) & (f->cap - 1)];
		PyMem_Free(f->buf);
		f->buf = nb;
		f->head = 0;
		f->cap *= 2;
	}
	f->buf[(f->head + f->len) & (f->cap - 1)] = v;
	f->len++;
}

static int fifo_pop(struct fifo *f)
{
	int v = f->buf[f->head];

	f->head = (f->head + 1) & (f->cap - 1);
	f->len--;
	return v;
}

static void q_del(int *q, int *n, int i)
{
	memmove(q + i, q + i + 1, (size_t)(*n - i - 1) * sizeof(int));
	(*n)--;
}

/* ---- host CPU state ---- */

static int cpu_active(Host *h, int c)
{
	struct cpu *p = &h->cpu[c];

	return p->curr >= 0 || p->sw_end > h->now;
}

static struct vm *vm_of(Host *h, int k)
{
	return &h->vm[h->task[k].vm];
}

static int task_group(Host *h, int k)
{
	return 2 * h->task[k].vm + h->task[k].kind;
}

/* Stall of thread k refilling its caches as it starts on CPU c. */
static double refill_cost(Host *h, int c, int k)
{
	int core = h->cpu[c].core, g = task_group(h, k);
	double all = h->mark_all[k * MAXCPU + core];
	double grp = h->mark_grp[k * MAXCPU + core];
	double same, other, cold;

	if (h->p.cache_refill <= 0 || h->p.cold_slow <= 1.0)
		return 0;
	double full = h->p.cache_refill * (h->task[k].kind == K_EMU ?
		h->p.emu_footprint : vm_of(h, k)->footprint);

	if (isnan(all))
		return full;
	same = h->cum_grp[g * MAXCPU + core] - grp;
	other = h->cum[core] - all - same;
	cold = 1.0 - exp(-(other + h->p.cache_same_group * same) /
			 h->p.cache_decay);
	if (h->p.vcpu_tlb_share > 0 && h->task[k].kind == K_VCPU) {
		/* KVM gives each vCPU its own VPID: no sharing there */
		double tlb = 1.0 - exp(-(other + same) / h->p.cache_decay);

		cold += h->p.vcpu_tlb_share * (tlb - cold);
	}
	return full * cold;
}

/* Thread k leaves CPU c: what ran on the core so far is its footprint. */
static void leave_core(Host *h, int c, int k)
{
	int core = h->cpu[c].core;

	h->mark_all[k * MAXCPU + core] = h->cum[core];
	h->mark_grp[k * MAXCPU + core] =
		h->cum_grp[task_group(h, k) * MAXCPU + core];
}

/*
 * Progress of dt ns of work on CPU p while it owes cache refill: slowed
 * by cold_slow until the debt is paid, then full speed.
 */
static double pay_debt(Host *h, struct cpu *p, double dt)
{
	double s = h->p.cold_slow, pay_time = p->debt * s / (s - 1.0);

	if (dt < pay_time) {
		p->debt -= dt * (s - 1.0) / s;
		return dt * p->rate / s;
	}
	p->debt = 0;
	return pay_time * p->rate / s + (dt - pay_time) * p->rate;
}

/* Account [last, now] on CPU c and let its thread progress. */
static void sync_cpu(Host *h, int c)
{
	struct cpu *p = &h->cpu[c];
	tns t0 = p->last, dt;
	double prog;
	struct task *k;
	struct vm *m;

	if (h->now <= t0)
		return;
	if (p->sw_end > t0) {
		tns e = p->sw_end < h->now ? p->sw_end : h->now;

		p->ovh += e - t0;
		t0 = e;
	}
	p->last = h->now;
	if (t0 >= h->now)
		return;
	dt = h->now - t0;
	if (p->curr < 0) {
		p->idle += dt;
		return;
	}
	p->busy += dt;
	prog = dt * p->rate;
	k = &h->task[p->curr];
	k->vr += dt;
	m = &h->vm[k->vm];
	if (k->kind == K_EMU ? k->item >= 0 : !k->g->poll_end) {
		/*
		 * Polling and looking for work touch next to nothing.  A
		 * guest evicts at full rate whatever it reuses (memcached
		 * touches random items: it pollutes much, reuses little);
		 * emulator threads touch rings and packet buffers only.
		 */
		double w = dt * (k->kind == K_EMU ? h->p.emu_footprint : 1.0);

		h->cum[p->core] += w;
		h->cum_grp[task_group(h, p->curr) * MAXCPU + p->core] += w;
		if (p->debt > 0)
			prog = pay_debt(h, p, dt);
	}
	if (k->kind == K_EMU) {
		m->c.emu_cpu += dt;
		k->rem -= prog;
	} else {
		struct gvcpu *g = k->g;

		m->c.vcpu_cpu += dt;
		if (g->poll_end)
			m->c.vcpu_poll += dt;
		else
			m->c.vcpu_guest += dt;
		/*
		 * Hotplug work is the time the vCPU spends on it while it
		 * runs (the paper's per-vCPU time), not work SMT or a cold
		 * cache slows.
		 */
		g->rem -= g->hp ? (double)dt : prog;
		if (g->curr >= 0 || g->in_irq || g->hp)
			m->c.guest_busy += dt;
		if (g->curr >= 0 && !g->sw && !g->in_irq)
			m->gt[g->curr].vr += dt;
	}
}

/* Bring CPU c and its sibling to now before c's state changes. */
static void touch(Host *h, int c)
{
	int s = h->cpu[c].sib;

	sync_cpu(h, c);
	h->dirty |= 1ULL << c;
	if (s >= 0) {
		sync_cpu(h, s);
		h->dirty |= 1ULL << s;
	}
}

static tns host_slice(Host *h, struct cpu *p)
{
	double s = h->p.lat / (p->nq + 1);

	return (tns)(s > h->p.min_gran ? s : h->p.min_gran);
}

static tns guest_slice(Host *h, struct gvcpu *g)
{
	double s = h->p.g_lat / (g->nq + 1);

	return (tns)(s > h->p.g_min_gran ? s : h->p.g_min_gran);
}

static tns after(Host *h, struct cpu *p, double rem, double rate)
{
	double s = h->p.cold_slow, t;

	if (rem <= EPS)
		return h->now;
	t = rem / rate;
	if (p->debt > 0) {
		double pay_time = p->debt * s / (s - 1.0);

		t = t * s <= pay_time ? t * s : pay_time + t - pay_time / s;
	}
	return h->now + (tns)ceil(t);
}

/* Slowdown of thread k (-1: none) while thread s runs on the sibling. */
static double smt_factor(Host *h, int k, int s)
{
	struct task *a, *b;

	if (k < 0 || s < 0)
		return h->p.smt_slow;
	a = &h->task[k];
	b = &h->task[s];
	if (b->kind == K_VCPU && b->g->poll_end)
		return h->p.smt_poll;
	if (a->kind != b->kind)
		return a->kind == K_VCPU ?
			1.0 + (h->p.smt_emu - 1.0) * h->vm[a->vm].emu_sens :
			h->p.smt_emu;
	return a->vm != b->vm ? h->p.smt_cross : h->p.smt_slow;
}

static void plan_cpu_work(Host *h, int c)
{
	struct cpu *p = &h->cpu[c];
	struct task *k;
	tns t, e;

	p->rate = p->sib >= 0 && cpu_active(h, p->sib) ?
		p->speed / smt_factor(h, p->curr, h->cpu[p->sib].curr) :
		p->speed;
	if (p->sw_end > h->now || p->sw_pending) {
		h->next_at[c] = p->sw_end > h->now ? p->sw_end : h->now;
		return;
	}
	if (p->curr < 0) {
		h->next_at[c] = !p->pull_at ? T_INF :
			p->pull_at > h->now ? p->pull_at : h->now;
		return;
	}
	if (p->resched) {
		h->next_at[c] = h->now;
		return;
	}
	k = &h->task[p->curr];
	if (k->kind == K_EMU) {
		t = k->item >= 0 ? after(h, p, k->rem, p->rate) : h->now;
	} else {
		struct gvcpu *g = k->g;

		if (g->poll_end) {
			h->next_at[c] = p->nq || g->poll_end < h->now ?
				h->now : g->poll_end;
			return;
		}
		t = g->hp ? h->now + (tns)ceil(g->rem) :
			after(h, p, g->rem, p->rate);
		if (!g->sw && !g->in_irq && g->curr >= 0 &&
		    (g->resched || g->nq)) {
			e = g->resched ? h->now : g->sl_start + guest_slice(h, g);
			if (e < t)
				t = e < h->now ? h->now : e;
		}
	}
	if (p->nq) {
		e = p->slice_start + host_slice(h, p);
		if (e < t)
			t = e < h->now ? h->now : e;
	}
	h->next_at[c] = t;
}

/*
 * Does thread a run before thread b?  The normal class always does
 * before SCHED_IDLE: its weight of 3 against 1024 leaves an idle-class
 * thread next to nothing while normal work is runnable.
 */
static int runs_before(Host *h, int a, int b)
{
	struct task *x = &h->task[a], *y = &h->task[b];

	return x->idle != y->idle ? x->idle < y->idle : x->vr < y->vr;
}

/*
 * Plan CPU c's next event.  A CPU running only SCHED_IDLE work is idle
 * to the load balancer: it may hold a pull at the next tick.
 */
static void plan_cpu(Host *h, int c)
{
	struct cpu *p = &h->cpu[c];

	plan_cpu_work(h, c);
	if (p->pull_at && p->curr >= 0 && h->task[p->curr].idle &&
	    p->sw_end <= h->now && !p->sw_pending) {
		tns at = p->pull_at > h->now ? p->pull_at : h->now;

		if (at < h->next_at[c])
			h->next_at[c] = at;
	}
}

static void update_min_vr(Host *h, struct cpu *p)
{
	double m = p->curr >= 0 ? h->task[p->curr].vr : 1e300;
	int i, cls = 0;

	if (h->nidle) {
		/* starved idle-class threads must not hold min_vr back */
		cls = p->curr < 0 || h->task[p->curr].idle;
		for (i = 0; i < p->nq && cls; i++)
			cls = h->task[p->q[i]].idle;
		if (p->curr >= 0 && h->task[p->curr].idle > cls)
			m = 1e300;
	}
	for (i = 0; i < p->nq; i++)
		if (h->task[p->q[i]].idle <= cls && h->task[p->q[i]].vr < m)
			m = h->task[p->q[i]].vr;
	if (m < 1e300 && m > p->min_vr)
		p->min_vr = m;
}

/* ---- host scheduler ---- */

static void on_switched_in(Host *h, int c);
static void rearm_pull(Host *h, int c);

/* Start switching CPU c from its current thread to k (-1: idle). */
static void switch_to(Host *h, int c, int k)
{
	struct cpu *p = &h->cpu[c];
	int prev = p->curr;
	double cost = h->p.sw_base;
	tns start = p->sw_end > h->now ? p->sw_end : h->now;
	struct vm *pm = NULL;

	double refill = 0;

	if (prev >= 0) {
		leave_core(h, c, prev);
		h->task[prev].left = h->now;
		pm = vm_of(h, prev);
		pm->c.host_ctxsw++;
		if (h->task[prev].kind == K_VCPU) {
			/* the VM exit runs on the vCPU thread's time */
			cost += h->p.sw_vm_out;
			pm->c.vcpu_cpu += (tns)h->p.sw_vm_out;
		}
	}
	if (k >= 0) {
		struct task *t = &h->task[k];
		struct vm *m = &h->vm[t->vm];

		if (m != pm)
			m->c.host_ctxsw++;
		/*
		 * CFS starts charging the next thread when it picks it
		 * (set_next_entity), so the switch runs on its time, as the
		 * VM entry does on a vCPU thread's.
		 */
		if (t->kind == K_VCPU) {
			cost += h->p.sw_vm_in;
			m->c.vcpu_slices++;
			m->c.vcpu_wait += h->now - t->since;
			m->c.vcpu_cpu += (tns)(h->p.sw_base + h->p.sw_vm_in);
		} else {
			m->c.emu_wait += h->now - t->since;
			m->c.emu_cpu += (tns)h->p.sw_base;
		}
		t->state = S_RUNNING;
		t->cpu = c;
		refill = refill_cost(h, c, k);
	}
	if (k >= 0 && p->idle_since >= 0) {
		double d = (double)(h->now - p->idle_since), cap;

		p->avg_idle += (d - p->avg_idle) / 8;
		cap = 2 * h->p.migration_cost;
		if (p->avg_idle > cap)
			p->avg_idle = cap;
	}
	p->idle_since = k >= 0 ? -1 : h->now;
	if (k >= 0 && !h->task[k].idle)
		p->pull_at = 0;
	p->curr = k;
	p->sw_end = start + (tns)cost;
	p->debt = refill;
	p->slice_start = p->sw_end;
	p->sw_pending = 1;
	p->resched = 0;
	/*
	 * Idle again (or running only SCHED_IDLE work): a busy CPU's tick
	 * kicks the nohz idle balancer while threads wait in its queue
	 * (nohz_balancer_kick), so this CPU pulls at the next tick even if
	 * a wake-up cleared the pull an earlier queueing had armed.
	 */
	if ((k < 0 || h->task[k].idle) && h->p.migration_cost > 0 &&
	    h->p.balance_tick > 0)
		rearm_pull(h, c);
}

static int is_idle(Host *h, int c)
{
	return h->cpu[c].curr < 0 && h->cpu[c].nq == 0;
}

/* Only SCHED_IDLE threads are runnable on CPU c (Linux sched_idle_cpu). */
static int sched_idle_cpu(Host *h, int c)
{
	struct cpu *p = &h->cpu[c];
	int i;

	if (!h->nidle || p->curr < 0 || !h->task[p->curr].idle)
		return 0;
	for (i = 0; i < p->nq; i++)
		if (!h->task[p->q[i]].idle)
			return 0;
	return 1;
}

static int select_cpu(Host *h, int k)
{
	struct task *t = &h->task[k];
	uint64_t allowed = t->mask & h->all_mask;
	int prev = t->cpu, i, c, best = -1, best_load = 1 << 30;
	int any_idle = -1;

	if (!allowed)
		allowed = h->all_mask;
	if (prev >= 0 && (allowed >> prev & 1) && is_idle(h, prev) &&
	    (h->cpu[prev].sib < 0 || is_idle(h, h->cpu[prev].sib)))
		return prev;
	/* c runs over (prev + i) mod ncpu */
	c = (prev + h->ncpu) % h->ncpu;
	for (i = 1; i <= h->ncpu; i++) {
		c = c + 1 < h->ncpu ? c + 1 : 0;
		if (!(allowed >> c & 1) || !is_idle(h, c))
			continue;
		if (h->cpu[c].sib < 0 || is_idle(h, h->cpu[c].sib))
			return c;	/* a whole idle core */
		if (any_idle < 0)
			any_idle = c;
	}
	if (prev >= 0 && (allowed >> prev & 1) && is_idle(h, prev))
		return prev;
	if (any_idle >= 0)
		return any_idle;
	if (h->nidle) {
		/* then a CPU that runs only SCHED_IDLE work (Linux >= 5.4) */
		if (prev >= 0 && (allowed >> prev & 1) && sched_idle_cpu(h, prev))
			return prev;
		for (c = 0; c < h->ncpu; c++)
			if ((allowed >> c & 1) && sched_idle_cpu(h, c))
				return c;
	}
	if (prev >= 0 && (allowed >> prev & 1))
		return prev;
	for (c = 0; c < h->ncpu; c++) {
		int load = h->cpu[c].nq + (h->cpu[c].curr >= 0);

		if ((allowed >> c & 1) && load < best_load) {
			best = c;
			best_load = load;
		}
	}
	return best;
}

/* The first scheduler tick after now. */
static tns next_tick(Host *h)
{
	double tick = h->p.balance_tick;

	return (tns)(ceil((double)(h->now + 1) / tick) * tick);
}

/*
 * Idle CPUs that k may use pull queued work at the next tick; for a
 * normal thread, so do CPUs running only SCHED_IDLE work.
 */
static void arm_idle_pull(Host *h, int k)
{
	uint64_t allowed = h->task[k].mask & h->all_mask;
	int normal = !h->task[k].idle;
	tns at;
	int c;

	if (h->p.migration_cost <= 0 || h->p.balance_tick <= 0)
		return;
	at = next_tick(h);
	for (c = 0; c < h->ncpu; c++)
		if ((allowed >> c & 1) &&
		    (is_idle(h, c) || (normal && sched_idle_cpu(h, c))) &&
		    (!h->cpu[c].pull_at || h->cpu[c].pull_at > at)) {
			h->cpu[c].pull_at = at;
			h->dirty |= 1ULL << c;
		}
}

/*
 * Idle CPU c tries again at the next tick if a queued thread may run
 * here; a CPU running SCHED_IDLE work, if a queued normal thread may.
 */
static void rearm_pull(Host *h, int c)
{
	int d, i, normal = h->cpu[c].curr >= 0;

	for (d = 0; d < h->ncpu; d++)
		for (i = 0; i < h->cpu[d].nq; i++)
			if ((h->task[h->cpu[d].q[i]].mask >> c & 1) &&
			    !(normal && h->task[h->cpu[d].q[i]].idle)) {
				h->cpu[c].pull_at = next_tick(h);
				h->dirty |= 1ULL << c;
				return;
			}
}

/* Put runnable thread k on a CPU; wake: it was asleep (sleeper credit). */
static void host_place(Host *h, int k, int wake)
{
	struct task *t = &h->task[k];
	int c = select_cpu(h, k);
	struct cpu *p = &h->cpu[c];

	touch(h, c);
	update_min_vr(h, p);
	if (wake) {
		double credit = -h->p.lat / 2;

		t->vr = p->min_vr + (t->vr > credit ? t->vr : credit);
	}
	t->since = h->now;
	t->cpu = c;
	if (p->curr < 0) {
		switch_to(h, c, k);
		return;
	}
	t->state = S_RUNNABLE;
	p->q[p->nq++] = k;
	if (h->task[p->curr].idle != t->idle) {
		/* check_preempt_wakeup: normal preempts SCHED_IDLE at once */
		if (t->idle < h->task[p->curr].idle)
			p->resched = 1;
	} else if (h->task[p->curr].vr - t->vr > h->p.wake_gran) {
		p->resched = 1;
	}
	arm_idle_pull(h, k);
}

static void host_wake(Host *h, int k)
{
	h->task[k].state = S_RUNNABLE;
	host_place(h, k, 1);
}

/*
 * An idle CPU pulls the longest-waiting thread it may run; normal: a
 * normal-class one only.
 */
static int steal(Host *h, int c, int normal)
{
	int d, i, bd = -1, bi = -1, bn = 0;

	for (d = 0; d < h->ncpu; d++) {
		struct cpu *p = &h->cpu[d];

		if (d == c || p->nq <= bn)
			continue;
		for (i = 0; i < p->nq; i++)
			if ((h->task[p->q[i]].mask >> c & 1) &&
			    !(normal && h->task[p->q[i]].idle) &&
			    (double)(h->now - h->task[p->q[i]].left) >=
			    h->p.migration_cost)
				break;
		if (i < p->nq) {
			bd = d;
			bi = i;
			bn = p->nq;
		}
	}
	if (bd < 0)
		return -1;
	{
		struct cpu *p = &h->cpu[bd];
		int k = p->q[bi];

		touch(h, bd);
		q_del(p->q, &p->nq, bi);
		h->task[k].vr += h->cpu[c].min_vr - p->min_vr;
		return k;
	}
}

static int pick_min(Host *h, struct cpu *p)
{
	int i, b = 0;

	for (i = 1; i < p->nq; i++)
		if (runs_before(h, p->q[i], p->q[b]))
			b = i;
	return b;
}

/*
 * The current thread of CPU c stops running: it sleeps (how = S_SLEEP),
 * is preempted (S_RUNNABLE) or must move elsewhere (-1, new affinity).
 */
static void cpu_resched(Host *h, int c, int how)
{
	struct cpu *p = &h->cpu[c];
	int prev = p->curr, next = -1, i;

	touch(h, c);
	if (how == S_RUNNABLE && (!p->nq ||
	    !runs_before(h, p->q[pick_min(h, p)], prev))) {
		/* nobody better (a waker may have been pulled away) */
		p->slice_start = h->now;
		p->resched = 0;
		return;
	}
	if (p->nq) {
		i = pick_min(h, p);
		next = p->q[i];
		q_del(p->q, &p->nq, i);
	} else {
		update_min_vr(h, p);
		if (p->avg_idle >= h->p.migration_cost)
			next = steal(h, c, 0);
	}
	if (prev >= 0) {
		struct task *t = &h->task[prev];

		if (how == S_SLEEP) {
			update_min_vr(h, p);
			t->state = S_SLEEP;
			t->vr -= p->min_vr;
		} else {
			t->state = S_RUNNABLE;
			t->since = h->now;
		}
		/*
		 * A polling vCPU that loses its CPU stops polling; it halts
		 * anew when it runs again (on_switched_in).  A stale window
		 * would make a vCPU that has found work go to sleep.
		 */
		if (t->kind == K_VCPU)
			h->vm[t->vm].gv[t->idx].poll_end = 0;
	}
	switch_to(h, c, next);
	if (prev >= 0 && how != S_SLEEP) {
		uint64_t idle = 0;
		int d;

		for (d = 0; d < h->ncpu; d++)
			if (is_idle(h, d))
				idle |= 1ULL << d;
		if (how < 0 || ((h->task[prev].mask & idle) &&
				h->p.migration_cost <= 0)) {
			h->task[prev].vr -= p->min_vr;
			host_place(h, prev, 1);
		} else {
			p->q[p->nq++] = prev;
			arm_idle_pull(h, prev);
		}
	}
}

/* ---- guest scheduler ---- */

static void g_resched(Host *h, struct vm *m, int v, int prev_state);

static int vcpu_task(struct vm *m, int v)
{
	return m->t_vcpu0 + v;
}

/* Sync the host CPU running vCPU v, if any, before guest state changes. */
static void g_touch(Host *h, struct vm *m, int v)
{
	struct task *t = &h->task[vcpu_task(m, v)];

	if (t->state == S_RUNNING)
		touch(h, t->cpu);
}

static int g_idle(struct vm *m, int v)
{
	return m->gv[v].curr < 0 && m->gv[v].nq == 0;
}

static int g_select(struct vm *m, int th)
{
	int orig = m->gt[th].vcpu, prev, i, v, best = 0, bl = 1 << 30;

	prev = orig < m->online ? orig : 0;
	if (g_idle(m, prev))
		return prev;
	/* v runs over (prev + i) mod online */
	for (i = 1, v = prev; i < m->online; i++) {
		v = v + 1 < m->online ? v + 1 : 0;
		if (g_idle(m, v))
			return v;
	}
	if (orig < m->online)
		return orig;
	for (v = 0; v < m->online; v++) {
		int l = m->gv[v].nq + (m->gv[v].curr >= 0);

		if (l < bl) {
			bl = l;
			best = v;
		}
	}
	return best;
}

static void g_update_min_vr(struct vm *m, struct gvcpu *g)
{
	double x = g->curr >= 0 ? m->gt[g->curr].vr : 1e300;
	int i;

	for (i = 0; i < g->nq; i++)
		if (m->gt[g->q[i]].vr < x)
			x = m->gt[g->q[i]].vr;
	if (x < 1e300 && x > g->min_vr)
		g->min_vr = x;
}

/*
 * A halted vCPU runs again: KVM's adaptive halt polling (5.10 defaults:
 * grow x2 from a twentieth of the maximum, shrink to 0) learns from how
 * long the vCPU was blocked.  kvm_vcpu_block reads the clock when the
 * thread is back on a CPU, so a vCPU that slept counts its wait in the
 * run queue too: on a crowded host, polling shrinks.
 */
static void adapt_poll(Host *h, struct gvcpu *g)
{
	double block = (double)(h->now - g->halted_at), max = h->p.halt_poll;

	g->halted_at = -1;
	if (block <= g->poll_ns)
		return;
	if (g->poll_ns > 0 && block > max) {
		g->poll_ns = 0;
	} else if (g->poll_ns < max && block < max) {
		g->poll_ns = g->poll_ns * 2 > max / 20 ? g->poll_ns * 2 : max / 20;
		if (g->poll_ns > max)
			g->poll_ns = max;
	}
}

static void g_idle_track(Host *h, struct gvcpu *g, int next);

/* Guest thread th becomes runnable on a vCPU; wake: it was asleep. */
static void g_place(Host *h, struct vm *m, int th, int wake)
{
	int v = g_select(m, th);
	struct gvcpu *g = &m->gv[v];
	struct gthr *t = &m->gt[th];
	int k = vcpu_task(m, v);

	g_touch(h, m, v);
	g_update_min_vr(m, g);
	if (wake) {
		double credit = -h->p.g_lat / 2;

		t->vr = g->min_vr + (t->vr > credit ? t->vr : credit);
	}
	t->vcpu = v;
	if (g->curr < 0 && !g->in_irq) {
		if (g->halted_at >= 0 && h->task[k].state == S_RUNNING) {
			m->c.polls_ok += g->poll_end > 0;
			adapt_poll(h, g);
		}
		g->poll_end = 0;
		g_idle_track(h, g, th);
		g->curr = th;
		t->state = S_RUNNING;
		g->sw = 1;
		g->rem = h->p.g_sw;
		g->sl_start = h->now;
		m->c.guest_ctxsw++;
		m->c.guest_sched_in++;
		if (h->task[k].state == S_SLEEP)
			host_wake(h, k);	/* IPI to a halted vCPU */
		return;
	}
	t->state = S_RUNNABLE;
	g->q[g->nq++] = th;
	if (g->curr >= 0 && !g->sw &&
	    m->gt[g->curr].vr - t->vr > h->p.g_wake_gran)
		g->resched = 1;
}

/* The vCPU (not mid-switch) enters the RX interrupt handler. */
static void irq_start(Host *h, struct vm *m, int v)
{
	struct gvcpu *g = &m->gv[v];

	if (g->curr >= 0)
		m->gt[g->curr].rem = g->rem;
	g->in_irq = 1;
	g->rem = m->irq_cost;
	(void)h;
}

/*
 * Request r's packet raises the RX interrupt of vCPU v (its virtio-net
 * queue's vCPU); the guest kernel hands it to the worker from there, so
 * a vCPU preempted on the host holds up its whole queue.
 */
static void g_irq(Host *h, struct vm *m, int v, int r)
{
	struct gvcpu *g = &m->gv[v];
	int k = vcpu_task(m, v);

	g_touch(h, m, v);
	fifo_push(&g->irq, r);
	if (g->in_irq)
		return;
	if (g->halted_at >= 0 && h->task[k].state == S_RUNNING) {
		m->c.polls_ok += g->poll_end > 0;
		adapt_poll(h, g);
	}
	g->poll_end = 0;
	if (!g->sw)
		irq_start(h, m, v);
	if (h->task[k].state == S_SLEEP)
		host_wake(h, k);	/* the interrupt wakes a halted vCPU */
}

static void g_wake(Host *h, struct vm *m, int th)
{
	m->gt[th].state = S_RUNNABLE;
	g_place(h, m, th, 1);
}

/*
 * Idle vCPU v takes the first thread queued on the busiest vCPU that
 * did not run there in the last migration cost (all, if hot_ok).
 */
static int g_steal(Host *h, struct vm *m, int v, int hot_ok)
{
	int u, i, bu = -1, bi = -1, bn = 0, th;

	for (u = 0; u < m->online; u++) {
		struct gvcpu *g = &m->gv[u];

		if (u == v || g->nq <= bn)
			continue;
		for (i = 0; i < g->nq; i++)
			if (hot_ok || (double)(h->now - m->gt[g->q[i]].left) >=
			    h->p.g_mig)
				break;
		if (i < g->nq) {
			bu = u;
			bi = i;
			bn = g->nq;
		}
	}
	if (bu < 0)
		return -1;
	th = m->gv[bu].q[bi];
	q_del(m->gv[bu].q, &m->gv[bu].nq, bi);
	m->gt[th].vr += m->gv[v].min_vr - m->gv[bu].min_vr;
	return th;
}

/* Guest threads wait in some vCPU's queue. */
static int g_queued(struct vm *m)
{
	int u;

	for (u = 0; u < m->online; u++)
		if (m->gv[u].nq)
			return 1;
	return 0;
}

/* The VM's idle vCPUs balance at the guest's next tick. */
static void g_arm_pull(Host *h, struct vm *m)
{
	tns at;

	if (h->p.g_mig <= 0)
		return;
	at = (tns)(ceil((double)(h->now + 1) / h->p.g_tick) * h->p.g_tick);
	if (!m->g_pull_at || m->g_pull_at > at)
		m->g_pull_at = at;
}

/*
 * vCPU v goes idle (newidle_balance): it pulls a cold thread only if
 * its idle periods average the migration cost; else what waits
 * elsewhere waits for the tick.
 */
static int g_newidle(Host *h, struct vm *m, int v)
{
	int th = -1;

	if (m->gv[v].avg_idle >= h->p.g_mig)
		th = g_steal(h, m, v, 0);
	if (th < 0 && g_queued(m))
		g_arm_pull(h, m);
	return th;
}

/* The guest's tick: its idle vCPUs pull what waits (nohz balance). */
static void g_balance(Host *h, struct vm *m)
{
	int v, th;

	m->g_pull_at = 0;
	for (v = 0; v < m->online; v++) {
		if (!g_idle(m, v))
			continue;
		th = g_steal(h, m, v, 0);
		if (th < 0)
			continue;
		m->gt[th].vcpu = v;
		m->gt[th].vr -= m->gv[v].min_vr;
		g_place(h, m, th, 1);
	}
	for (v = 0; v < m->online; v++)
		if (g_idle(m, v) && g_queued(m)) {
			g_arm_pull(h, m);	/* all hot: next tick */
			break;
		}
}

static int g_pick_min(struct vm *m, struct gvcpu *g)
{
	int i, b = 0;

	for (i = 1; i < g->nq; i++)
		if (m->gt[g->q[i]].vr < m->gt[g->q[b]].vr)
			b = i;
	return b;
}

/* vCPU v's guest runs thread next (-1: goes idle). */
static void g_idle_track(Host *h, struct gvcpu *g, int next)
{
	if (next >= 0 && g->idle_since >= 0) {
		double d = (double)(h->now - g->idle_since);

		g->avg_idle += (d - g->avg_idle) / 8;
		if (g->avg_idle > 2 * h->p.g_mig)
			g->avg_idle = 2 * h->p.g_mig;
	}
	if (next >= 0)
		g->idle_since = -1;
	else if (g->idle_since < 0)
		g->idle_since = h->now;
}

static void g_switch(Host *h, struct vm *m, int v, int next)
{
	struct gvcpu *g = &m->gv[v];

	if (g->curr >= 0)
		m->gt[g->curr].left = h->now;
	g_idle_track(h, g, next);
	g->curr = next;
	g->sw = 1;
	g->rem = h->p.g_sw;
	g->sl_start = h->now;
	g->resched = 0;
	g->poll_end = 0;
	m->c.guest_ctxsw++;
	if (next >= 0) {
		m->c.guest_sched_in++;
		m->gt[next].state = S_RUNNING;
		m->gt[next].vcpu = v;
	}
}

/*
 * The current guest thread of vCPU v (running on its host CPU, already
 * touched) stops: it sleeps (S_SLEEP) or is preempted (S_RUNNABLE).
 */
static void g_resched(Host *h, struct vm *m, int v, int how)
{
	struct gvcpu *g = &m->gv[v];
	int prev = g->curr, next = -1, i, u;

	if (how == S_RUNNABLE) {
		if (!g->nq || m->gt[g->q[g_pick_min(m, g)]].vr >=
		    m->gt[prev].vr) {
			g->sl_start = h->now;
			g->resched = 0;
			return;
		}
		m->gt[prev].rem = g->rem;
	}
	if (g->nq) {
		i = g_pick_min(m, g);
		next = g->q[i];
		q_del(g->q, &g->nq, i);
	} else {
		g_update_min_vr(m, g);
		next = g_newidle(h, m, v);
	}
	if (prev >= 0 && how == S_SLEEP) {
		g_update_min_vr(m, g);
		m->gt[prev].state = S_SLEEP;
		m->gt[prev].vr -= g->min_vr;
	}
	g_switch(h, m, v, next);
	if (prev >= 0 && how == S_RUNNABLE) {
		m->gt[prev].state = S_RUNNABLE;
		for (u = 0; u < m->online; u++)
			if (g_idle(m, u))
				break;
		if (u < m->online && h->p.g_mig <= 0) {
			m->gt[prev].vr -= g->min_vr;
			g_place(h, m, prev, 1);
		} else {
			g->q[g->nq++] = prev;	/* a preempted thread stays */
			if (u < m->online)
				g_arm_pull(h, m);
		}
	}
}

/* ---- workload ---- */

static void emu_wake(Host *h, struct vm *m, int e)
{
	struct task *t = &h->task[m->t_emu0 + e];

	t->fresh = 1;
	t->debt = h->p.emu_wakeup;
	m->c.emu_wakes++;
	host_wake(h, m->t_emu0 + e);
}

/*
 * Emulator work for queue q.  Per-queue workers: q's worker takes it,
 * woken if asleep (a busy worker finds it in its loop: the batching of
 * vhost's work list).  Shared queue: a sleeping thread is woken unless
 * one already woken will take it.
 */
static void emu_push(Host *h, struct vm *m, int item, int q)
{
	int e, fresh = 0;

	if (h->p.emu_queues) {
		fifo_push(&m->eq[q], item);
		if (h->task[m->t_emu0 + q].state == S_SLEEP)
			emu_wake(h, m, q);
		return;
	}
	fifo_push(&m->eq[0], item);
	for (e = 0; e < m->nemu; e++)
		fresh += h->task[m->t_emu0 + e].fresh;
	if (m->eq[0].len <= fresh)
		return;
	for (e = 0; e < m->nemu; e++) {
		if (h->task[m->t_emu0 + e].state == S_SLEEP) {
			emu_wake(h, m, e);
			return;
		}
	}
}

/* The vCPU that takes queue pair e's interrupts: e mod online. */
static int queue_vcpu(struct vm *m, int e)
{
	return e < m->online ? e : e % m->online;
}

/* The virtio-net queue pair of request r: its connection's (RSS). */
static int req_queue(struct vm *m, int r)
{
	return m->gt[m->req[r].thr].queue;
}

static double svc_draw(struct vm *m, struct req *r)
{
	return draw(&r->rng, m->svc_kind, m->svc_mean, m->svc_a, m->svc_b);
}

/*
 * Worker th takes its next piece of work; 0 if there is none.  A
 * connection has one request in flight: between its round trips the
 * worker waits for the next query and serves nothing else.
 */
static int worker_take(struct vm *m, int th)
{
	struct gthr *t = &m->gt[th];

	if (t->hold >= 0) {
		if (!t->cont)
			return 0;
		t->req = t->hold;
		t->cont = 0;
	} else if (m->tq[th].len) {
		t->req = fifo_pop(&m->tq[th]);
	} else {
		return 0;
	}
	t->rem = svc_draw(m, &m->req[t->req]);
	t->cs = t->rem * m->lock_share;
	t->rem -= t->cs;
	return 1;
}

/* Spinning thread th of VM m gets the lock; its vCPU goes on. */
static void lock_grant(Host *h, struct vm *m, int th)
{
	struct gthr *t = &m->gt[th];
	struct gvcpu *g = &m->gv[t->vcpu];

	m->lock_owner = th;
	t->lk = L_HELD;
	t->rem = t->cs;
	if (t->state == S_RUNNING && g->curr == th && !g->sw && !g->in_irq) {
		g_touch(h, m, t->vcpu);
		g->rem = t->cs;
	}
}

/*
 * The lock is free: the first waiter still spinning takes it at once;
 * if all sleep, the first is woken to try again, and a thread that
 * comes to the lock meanwhile may take it first (as a futex mutex).
 */
static void lock_release(Host *h, struct vm *m)
{
	struct fifo *q = &m->lockq;
	int i, th = -1;

	for (i = 0; i < q->len; i++) {
		th = q->buf[(q->head + i) & (q->cap - 1)];
		if (m->gt[th].lk == L_SPIN)
			break;
	}
	if (i == q->len) {
		if (!q->len)
			return;
		th = fifo_pop(q);
		m->gt[th].lk = L_FREE;
		m->gt[th].rem = 0;	/* it retries as soon as it runs */
		g_wake(h, m, th);
		return;
	}
	for (; i > 0; i--)	/* close the gap, keeping the order */
		q->buf[(q->head + i) & (q->cap - 1)] =
			q->buf[(q->head + i - 1) & (q->cap - 1)];
	q->head = (q->head + 1) & (q->cap - 1);
	q->len--;
	lock_grant(h, m, th);
}

/*
 * The thread on vCPU v is done with the unlocked part of its round, or
 * with its spinning: 1 if it now holds the lock, spins or sleeps for it
 * (its round goes on), 0 if the round is over.
 */
static int lock_step(Host *h, struct vm *m, int v)
{
	struct gvcpu *g = &m->gv[v];
	int th = g->curr;
	struct gthr *t = &m->gt[th];

	if (t->lk == L_HELD) {
		t->lk = L_FREE;
		m->lock_owner = -1;
		lock_release(h, m);
		return 0;
	}
	if (t->lk == L_SPIN) {
		t->lk = L_WAIT;
		g_resched(h, m, v, S_SLEEP);
		return 1;
	}
	if (t->cs <= EPS)
		return 0;
	if (m->lock_owner < 0) {
		m->lock_owner = th;
		t->lk = L_HELD;
		g->rem = t->cs;
		return 1;
	}
	fifo_push(&m->lockq, th);
	if (h->p.lock_spin > 0) {
		t->lk = L_SPIN;
		g->rem = h->p.lock_spin;
	} else {
		t->lk = L_WAIT;
		g_resched(h, m, v, S_SLEEP);
	}
	return 1;
}

/*
 * A request reaches the guest.  Its connection belongs to one worker
 * thread (memcached, nginx and MySQL all work that way), which it wakes.
 */
static void deliver(Host *h, struct vm *m, int r)
{
	int th = m->req[r].thr;

	if (m->gt[th].hold == r)
		m->gt[th].cont = 1;
	else
		fifo_push(&m->tq[th], r);
	if (m->gt[th].state == S_SLEEP && m->gt[th].lk != L_WAIT &&
	    (m->gt[th].hold < 0 || m->gt[th].cont))
		g_wake(h, m, th);
}

static void record(struct vm *m, double us)
{
	if (m->nlat == m->latcap) {
		Py_ssize_t nc = m->latcap ? m->latcap * 2 : 4096;
		double *nb = PyMem_Realloc(m->lat, nc * sizeof(double));

		if (!nb)
			return;
		m->lat = nb;
		m->latcap = nc;
	}
	m->lat[m->nlat++] = us;
}

static void emu_done(Host *h, struct vm *m, int item, int e)
{
	int r = item >> 2, th;
	struct req *q;

	switch (item & 3) {
	case W_MID:
		m->req[r].round++;
		/* fall through */
	case W_IN:
		if (m->irq_cost > 0)
			g_irq(h, m, queue_vcpu(m, e), r);
		else
			deliver(h, m, r);
		break;
	case W_OUT:
		q = &m->req[r];
		record(m, (h->now - q->arr) / 1000.0);
		m->c.done++;
		m->outstanding--;
		m->free[m->nfree++] = r;
		break;
	case W_BEIO:
		th = r;
		if (m->stopped)
			break;	/* its I/O done, the worker stays asleep */
		m->gt[th].rem = draw(&m->rng, D_EXP, m->be_chunk, 0, 0);
		m->gt[th].start = h->now;
		g_wake(h, m, th);
		break;
	}
}

/*
 * Does a packet thread e hands the guest now raise an interrupt?  Not
 * while the guest's handler for that queue is pending or running: its
 * NAPI poll has the queue's interrupt disabled (virtqueue_disable_cb)
 * and vhost_notify finds the event index not passed.
 */
static int irq_needed(Host *h, struct vm *m, int e)
{
	struct gvcpu *g = &m->gv[queue_vcpu(m, e)];

	return !h->p.irq_coalesce || m->irq_cost <= 0 ||
		(!g->in_irq && !g->irq.len);
}

static double emu_inject(Host *h, struct vm *m, int e)
{
	if (!irq_needed(h, m, e))
		return 0;
	m->c.irqs++;
	return h->p.irq_inject;
}

static double emu_cost(Host *h, struct vm *m, int item, int e)
{
	struct req *r = &m->req[item >> 2];

	switch (item & 3) {
	case W_IN:
		return rexp(&r->rng, m->emu_in) + emu_inject(h, m, e);
	case W_MID:
		return rexp(&r->rng, m->emu_in) + rexp(&r->rng, m->emu_out) +
			emu_inject(h, m, e);
	case W_OUT:
		return rexp(&r->rng, m->emu_out);
	default:
		return rexp(&m->rng, m->be_io);
	}
}

/* Emulator thread k on CPU c looks for work or goes to sleep. */
static void emu_next(Host *h, int c, int k)
{
	struct task *t = &h->task[k];
	struct vm *m = &h->vm[t->vm];

	struct fifo *q = &m->eq[h->p.emu_queues ? t->idx : 0];

	t->fresh = 0;
	if (q->len) {
		t->item = fifo_pop(q);
		t->rem = emu_cost(h, m, t->item, t->idx) + t->debt;
		t->debt = 0;
	} else {
		t->item = -1;
		cpu_resched(h, c, S_SLEEP);
	}
}

/* The guest thread on vCPU v has finished its switch-in. */
static void g_started(Host *h, struct vm *m, int v)
{
	struct gvcpu *g = &m->gv[v];
	struct gthr *t = &m->gt[g->curr];

	if (!m->be && t->req < 0 && !worker_take(m, g->curr)) {
		g_resched(h, m, v, S_SLEEP);
		return;
	}
	g->rem = t->rem;
}

/* The guest thread on vCPU v has done its piece of work. */
static void g_work_done(Host *h, struct vm *m, int v)
{
	struct gvcpu *g = &m->gv[v];
	int th = g->curr;
	struct gthr *t = &m->gt[th];

	if (m->be) {
		record(m, (h->now - t->start) / 1000.0);
		m->c.done++;
		g_resched(h, m, v, S_SLEEP);
		emu_push(h, m, (th << 2) | W_BEIO, th % m->nemu);
		return;
	}
	if (m->lock_share > 0 && lock_step(h, m, v))
		return;
	t->cs = 0;
	if (m->req[t->req].round + 1 < m->rounds) {
		t->hold = t->req;
		emu_push(h, m, (t->req << 2) | W_MID, req_queue(m, t->req));
	} else {
		t->hold = -1;
		emu_push(h, m, (t->req << 2) | W_OUT, req_queue(m, t->req));
	}
	t->req = -1;
	if (worker_take(m, th)) {
		g->rem = t->rem;
		return;
	}
	g_resched(h, m, v, S_SLEEP);
}

/*
 * The guest idles and executes HLT.  KVM polls for a wake-up first, as
 * long as nothing else wants this CPU, then the vCPU thread sleeps.
 */
static void vcpu_halt(Host *h, int c, struct gvcpu *g)
{
	if (g->halted_at < 0) {
		g->halted_at = h->now;
		h->vm[h->task[h->cpu[c].curr].vm].c.halts++;
	}
	if (g->poll_ns >= 1 && !h->cpu[c].nq) {
		g->poll_end = h->now + (tns)g->poll_ns;
		return;
	}
	cpu_resched(h, c, S_SLEEP);
}

static void on_switched_in(Host *h, int c)
{
	struct cpu *p = &h->cpu[c];
	struct task *t;
	struct vm *m;
	struct gvcpu *g;

	p->sw_pending = 0;
	if (p->curr < 0)
		return;
	t = &h->task[p->curr];
	m = &h->vm[t->vm];
	if (t->kind == K_EMU) {
		if (t->item < 0)
			emu_next(h, c, p->curr);
		return;
	}
	g = &m->gv[t->idx];
	if (g->halted_at >= 0)
		adapt_poll(h, g);	/* woken from sleep: now back on a CPU */
	if (g->curr < 0 && !g->sw && !g->in_irq && !g->hp) {
		int th = g_newidle(h, m, t->idx);

		if (th < 0)
			vcpu_halt(h, c, g);
		else
			g_switch(h, m, t->idx, th);
	}
}

/* The RX interrupt handler on vCPU v has passed one request on. */
static void irq_done(Host *h, int c, struct vm *m, int v)
{
	struct gvcpu *g = &m->gv[v];

	deliver(h, m, fifo_pop(&g->irq));
	if (g->irq.len) {
		g->rem = m->irq_cost;
		return;
	}
	g->in_irq = 0;
	if (g->curr >= 0)
		g->rem = m->gt[g->curr].rem;
	else if (g->nq)
		g_resched(h, m, v, S_SLEEP);	/* idle: run what it woke */
	else
		vcpu_halt(h, c, g);
}

static void hp_done(Host *h, int c, struct vm *m, int v);

/* Handle what is due on CPU c at h->now. */
static void cpu_event(Host *h, int c)
{
	struct cpu *p = &h->cpu[c];
	struct task *t;

	touch(h, c);
	if (p->sw_pending && p->sw_end <= h->now) {
		on_switched_in(h, c);
		return;
	}
	if (p->pull_at && p->pull_at <= h->now && p->curr >= 0 &&
	    h->task[p->curr].idle) {
		int k;

		/* balanced here, a normal thread preempts SCHED_IDLE work */
		p->pull_at = 0;
		update_min_vr(h, p);
		k = steal(h, c, 1);
		if (k >= 0) {
			h->task[k].cpu = c;
			p->q[p->nq++] = k;
			p->resched = 1;
		} else {
			rearm_pull(h, c);
		}
		return;
	}
	if (p->curr < 0) {
		if (p->pull_at && p->pull_at <= h->now) {
			int k;

			p->pull_at = 0;
			update_min_vr(h, p);
			k = steal(h, c, 0);
			if (k >= 0)
				switch_to(h, c, k);
			else
				rearm_pull(h, c);	/* all hot: next tick */
		}
		return;
	}
	t = &h->task[p->curr];
	if (t->kind == K_VCPU && t->g->poll_end) {
		struct gvcpu *g = t->g;

		if (p->nq || h->now >= g->poll_end) {
			g->poll_end = 0;
			cpu_resched(h, c, S_SLEEP);
		} else if (p->resched) {
			/*
			 * The waker that asked for the CPU has been pulled
			 * away (steal, new affinity): nobody to yield to, as
			 * in cpu_resched.  Left set, plan_cpu would plan
			 * this CPU at h->now forever.
			 */
			p->slice_start = h->now;
			p->resched = 0;
		}
		return;
	}
	if (p->resched) {
		cpu_resched(h, c, S_RUNNABLE);
		return;
	}
	if (t->kind == K_EMU) {
		if (t->item < 0 || t->rem <= EPS) {
			int it = t->item, k = p->curr;

			t->item = -1;
			if (it >= 0)	/* wakes elsewhere never replace curr */
				emu_done(h, &h->vm[t->vm], it, t->idx);
			emu_next(h, c, k);
			return;
		}
	} else {
		struct vm *m = &h->vm[t->vm];
		struct gvcpu *g = &m->gv[t->idx];

		if (g->hp) {
			if (g->rem <= EPS) {
				hp_done(h, c, m, t->idx);
				return;
			}
		} else if (g->curr < 0 && !g->sw && !g->in_irq) {
			g->poll_end = 0;
			cpu_resched(h, c, S_SLEEP);
			return;
		} else if (g->rem <= EPS) {
			if (g->in_irq) {
				irq_done(h, c, m, t->idx);
			} else if (g->sw) {
				g->sw = 0;
				if (g->curr >= 0)
					g_started(h, m, t->idx);
				if (!g->sw && g->irq.len)
					irq_start(h, m, t->idx);
				else if (g->curr < 0 && !g->sw)
					vcpu_halt(h, c, g);
			} else {
				g_work_done(h, m, t->idx);
			}
			return;
		}
		if (!g->sw && !g->in_irq && g->curr >= 0 && (g->resched ||
		    (g->nq && h->now >= g->sl_start + guest_slice(h, g)))) {
			g_resched(h, m, t->idx, S_RUNNABLE);
			return;
		}
	}
	if (p->nq && h->now >= p->slice_start + host_slice(h, p))
		cpu_resched(h, c, S_RUNNABLE);
}

/* x mod n; most profiles have a power of two of workers: no division */
static int pick(uint64_t x, int n)
{
	if (n & (n - 1))
		return (int)(x % (uint64_t)n);
	return (int)(x & (uint64_t)(n - 1));
}

static void arrival(Host *h, struct vm *m)
{
	m->c.arrived++;
	if (m->outstanding >= h->p.max_outstanding || !m->nfree) {
		m->c.dropped++;
	} else {
		int r = m->free[--m->nfree];
		struct req *q = &m->req[r];

		q->arr = h->now;
		q->round = 0;
		q->rng = sm64(&m->rng);
		q->thr = pick(sm64(&q->rng), m->nthr);
		m->outstanding++;
		emu_push(h, m, (r << 2) | W_IN, req_queue(m, r));
	}
	m->next_arr = h->now + (tns)ceil(rexp(&m->rng, 1e9 / m->rps));
}

static void replan(Host *h)
{
	while (h->dirty) {
		int c = __builtin_ctzll(h->dirty);

		h->dirty &= h->dirty - 1;
		plan_cpu(h, c);
	}
}

/* Describe what CPU c (or VM arrival) is doing, for the livelock error. */
static void stuck_error(Host *h, int who, long long n)
{
	char buf[512] = "";
	struct cpu *p;
	struct task *k;

	if (who >= h->ncpu) {
		PyErr_Format(PyExc_RuntimeError,
			     "ufo_sim engine livelock: %lld events at now=%lld ns "
			     "without time advancing (VM %d arrivals)",
			     n, h->now, who - h->ncpu);
		return;
	}
	p = &h->cpu[who];
	if (p->curr >= 0) {
		k = &h->task[p->curr];
		if (k->kind == K_VCPU) {
			struct gvcpu *g = &h->vm[k->vm].gv[k->idx];

			PyOS_snprintf(buf, sizeof(buf),
				      "vCPU %d of VM %d: gcurr=%d gnq=%d sw=%d "
				      "in_irq=%d irq=%d resched=%d rem=%g "
				      "poll_end=%lld sl_start=%lld online=%d",
				      k->idx, k->vm, g->curr, g->nq, g->sw,
				      g->in_irq, g->irq.len, g->resched,
				      g->rem, g->poll_end, g->sl_start,
				      h->vm[k->vm].online);
		} else {
			PyOS_snprintf(buf, sizeof(buf),
				      "emulator %d of VM %d: item=%d rem=%g",
				      k->idx, k->vm, k->item, k->rem);
		}
	}
	PyErr_Format(PyExc_RuntimeError,
		     "ufo_sim engine livelock: %lld events at now=%lld ns "
		     "without time advancing; CPU %d: curr=%d nq=%d "
		     "resched=%d sw_pending=%d sw_end=%lld slice_start=%lld "
		     "next=%lld; %s", n, h->now, who, p->curr, p->nq,
		     p->resched, p->sw_pending, p->sw_end, p->slice_start,
		     h->next_at[who], buf);
}

/* Run events up to until; -1 with an exception set on a livelock. */
static int run_until(Host *h, tns until)
{
	int c;
	long long same = 0;

	for (;;) {
		tns t = T_INF;
		int who = -1, i;

		/* in CPU order: the lower CPU wins a tie */
		for (i = 0; i < h->ncpu; i++) {
			if (h->next_at[i] < t) {
				t = h->next_at[i];
				who = i;
			}
		}
		for (i = 0; i < h->nvm; i++) {
			if (h->vm[i].next_arr < t) {
				t = h->vm[i].next_arr;
				who = h->ncpu + i;
			}
			if (h->vm[i].g_pull_at && h->vm[i].g_pull_at < t) {
				t = h->vm[i].g_pull_at;
				who = h->ncpu + h->nvm + i;
			}
		}
		if (t > until)
			break;
		if (t != h->now) {
			same = 0;
		} else if (++same > h->stuck_limit) {
			stuck_error(h, who, same);
			return -1;
		}
		h->now = t;
		if (who < h->ncpu)
			cpu_event(h, who);
		else if (who < h->ncpu + h->nvm)
			arrival(h, &h->vm[who - h->ncpu]);
		else
			g_balance(h, &h->vm[who - h->ncpu - h->nvm]);
		replan(h);
	}
	h->now = until;
	for (c = 0; c < h->ncpu; c++)
		sync_cpu(h, c);
	return 0;
}

/* ---- vCPU hot(un)plug and pinning ---- */

/* Take runnable thread k off its CPU's queue; it sleeps until placed. */
static void dequeue(Host *h, int k)
{
	struct task *t = &h->task[k];
	struct cpu *p = &h->cpu[t->cpu];
	int i;

	touch(h, t->cpu);
	for (i = 0; i < p->nq; i++)
		if (p->q[i] == k)
			q_del(p->q, &p->nq, i);
	update_min_vr(h, p);
	t->vr -= p->min_vr;
	t->state = S_SLEEP;
}

/* vCPU v gives up its guest threads (into moved) and its guest state. */
static void vcpu_evict(Host *h, struct vm *m, int v, int *moved, int *n)
{
	struct gvcpu *g = &m->gv[v];
	int i;

	g_touch(h, m, v);
	if (g->curr >= 0) {
		if (!g->sw && !g->in_irq)
			m->gt[g->curr].rem = g->rem;
		moved[(*n)++] = g->curr;
	}
	for (i = 0; i < g->nq; i++)
		moved[(*n)++] = g->q[i];
	g->curr = -1;
	g->nq = 0;
	g->sw = 0;
	g->resched = 0;
	g->rem = 0;
	g->poll_end = 0;
	g->halted_at = -1;
	g->in_irq = 0;
	g->hp = 0;
}

/*
 * The vCPUs the guest counts online (cpu_online_mask): a vCPU going
 * offline is inactive at once but online until its teardown is done.
 */
static int online_count(struct vm *m)
{
	return m->online + (m->hp_v >= 0 && m->hp_down);
}

/* vCPU v's thread leaves the host CPUs: the vCPU is offline. */
static void vcpu_sleep(Host *h, struct vm *m, int v)
{
	int k = vcpu_task(m, v);
	struct task *t = &h->task[k];

	if (t->state == S_RUNNING)
		cpu_resched(h, t->cpu, S_SLEEP);
	else if (t->state == S_RUNNABLE)
		dequeue(h, k);
}

/* Threads taken from offlined vCPUs go to the online ones. */
static void place_moved(Host *h, struct vm *m, int *moved, int nm)
{
	int i;

	for (i = 0; i < nm; i++) {
		m->gt[moved[i]].state = S_RUNNABLE;
		m->gt[moved[i]].vr -= m->gv[m->gt[moved[i]].vcpu].min_vr;
		g_place(h, m, moved[i], 1);
	}
}

/* Interrupts pending on vCPUs from..nvcpu-1 move to the online ones. */
static void move_irqs(Host *h, struct vm *m, int from)
{
	int v;

	for (v = from; v < m->nvcpu; v++)
		while (m->gv[v].irq.len)
			g_irq(h, m, v % m->online, fifo_pop(&m->gv[v].irq));
}

/* Idle online vCPUs pull queued threads (a vCPU just onlined). */
static void pull_to_idle(Host *h, struct vm *m)
{
	int v;

	for (v = 0; v < m->online; v++) {
		if (g_idle(m, v)) {
			int th = g_steal(h, m, v, 1);

			if (th >= 0) {
				m->gt[th].vcpu = v;
				m->gt[th].vr -= m->gv[v].min_vr;
				g_place(h, m, th, 1);
			}
		}
	}
}

/* A hotplug under way stops where it is: its vCPU's thread sleeps. */
static void hp_abort(Host *h, struct vm *m)
{
	int v = m->hp_v;

	if (v < 0)
		return;
	g_touch(h, m, v);
	m->gv[v].hp = 0;
	m->gv[v].rem = 0;
	m->hp_v = -1;
	vcpu_sleep(h, m, v);
}

/* Keep vCPUs 0..n-1 online from now on, at no cost. */
static void set_online(Host *h, struct vm *m, int n)
{
	int moved[1024], nm = 0, v;

	hp_abort(h, m);
	if (n < 1)
		n = 1;
	if (n > m->nvcpu)
		n = m->nvcpu;
	m->hp_target = n;
	for (v = n; v < m->online; v++) {
		vcpu_evict(h, m, v, moved, &nm);
		vcpu_sleep(h, m, v);
	}
	m->online = n;
	move_irqs(h, m, n);
	place_moved(h, m, moved, nm);
	pull_to_idle(h, m);
}

/*
 * The next step towards hp_target: one vCPU at a time, as the guest
 * module's kthread calls remove_cpu() or add_cpu() in turn.  A vCPU
 * going offline is inactive at once (its threads move away, nothing new
 * is placed on it) and runs the teardown for the hotplug cost before
 * its thread sleeps; one coming online runs its bring-up first and
 * takes guest threads after.
 */
static void hp_next(Host *h, struct vm *m)
{
	int moved[1024], nm = 0, v, k;
	struct gvcpu *g;

	m->hp_v = -1;
	if (m->online == m->hp_target)
		return;
	m->hp_down = m->online > m->hp_target;
	if (m->hp_down) {
		v = m->online - 1;
		vcpu_evict(h, m, v, moved, &nm);
		m->online = v;
		move_irqs(h, m, v);
		place_moved(h, m, moved, nm);
	} else {
		v = m->online;
	}
	g = &m->gv[v];
	k = vcpu_task(m, v);
	g_touch(h, m, v);
	g->hp = 1;
	g->rem = h->p.hotplug;
	g->poll_end = 0;
	g->halted_at = -1;
	m->hp_v = v;
	if (h->task[k].state == S_SLEEP)
		host_wake(h, k);
	else if (h->task[k].state == S_RUNNING)
		h->dirty |= 1ULL << h->task[k].cpu;
}

/* Aim at n online vCPUs, paying the hotplug cost of each step. */
static void set_online_costed(Host *h, struct vm *m, int n)
{
	if (h->p.hotplug <= 0) {
		set_online(h, m, n);
		return;
	}
	if (n < 1)
		n = 1;
	if (n > m->nvcpu)
		n = m->nvcpu;
	m->hp_target = n;
	if (m->hp_v < 0)
		hp_next(h, m);
}

/* vCPU v (on CPU c) has done its hotplug work. */
static void hp_done(Host *h, int c, struct vm *m, int v)
{
	struct gvcpu *g = &m->gv[v];

	g->hp = 0;
	g->rem = 0;
	if (m->hp_down) {
		cpu_resched(h, c, S_SLEEP);
	} else {
		m->online = v + 1;
		pull_to_idle(h, m);
		if (g->curr < 0 && !g->sw && !g->in_irq)
			vcpu_halt(h, c, g);
	}
	hp_next(h, m);
}

static void set_mask(Host *h, int k, uint64_t mask)
{
	struct task *t = &h->task[k];

	t->mask = mask;
	if (t->state == S_RUNNING && !(mask >> t->cpu & 1)) {
		cpu_resched(h, t->cpu, -1);
	} else if (t->state == S_RUNNABLE && !(mask >> t->cpu & 1)) {
		dequeue(h, k);
		host_place(h, k, 1);
	}
}

/* After affinity changes, idle CPUs pull what they may now run. */
static void pull_idle(Host *h)
{
	int c;

	for (c = 0; c < h->ncpu; c++) {
		if (is_idle(h, c)) {
			int k = steal(h, c, 0);

			if (k >= 0) {
				touch(h, c);
				switch_to(h, c, k);
			} else {
				rearm_pull(h, c);
			}
		}
	}
}

/* ---- Python glue ---- */

static int grow_queues(Host *h)
{
	int c;

	for (c = 0; c < h->ncpu; c++) {
		int *nq = PyMem_Realloc(h->cpu[c].q, h->ntask * sizeof(int));

		if (!nq)
			return -1;
		h->cpu[c].q = nq;
	}
	return 0;
}

/* Room for the cache marks of ntask threads and nvm VMs' groups. */
static int grow_marks(Host *h, int ntask, int nvm)
{
	size_t nt = (size_t)ntask * MAXCPU, ng = (size_t)nvm * 2 * MAXCPU;
	size_t ot = (size_t)h->ntask * MAXCPU, og = (size_t)h->nvm * 2 * MAXCPU;
	double *a = PyMem_Realloc(h->mark_all, nt * sizeof(double));
	double *b, *g;
	size_t i;

	if (!a)
		return -1;
	h->mark_all = a;
	b = PyMem_Realloc(h->mark_grp, nt * sizeof(double));
	if (!b)
		return -1;
	h->mark_grp = b;
	g = PyMem_Realloc(h->cum_grp, ng * sizeof(double));
	if (!g)
		return -1;
	h->cum_grp = g;
	for (i = ot; i < nt; i++)
		a[i] = b[i] = NAN;
	for (i = og; i < ng; i++)
		g[i] = 0;
	return 0;
}

static void Host_dealloc(Host *h)
{
	int c, i;

	for (c = 0; c < h->ncpu; c++)
		PyMem_Free(h->cpu[c].q);
	for (i = 0; i < h->nvm; i++) {
		struct vm *m = &h->vm[i];
		int v;

		for (v = 0; v < m->nvcpu; v++) {
			PyMem_Free(m->gv[v].q);
			PyMem_Free(m->gv[v].irq.buf);
		}
		PyMem_Free(m->gv);
		PyMem_Free(m->gt);
		PyMem_Free(m->req);
		PyMem_Free(m->free);
		for (v = 0; m->tq && v < m->nthr; v++)
			PyMem_Free(m->tq[v].buf);
		PyMem_Free(m->tq);
		for (v = 0; m->eq && v < m->nemu; v++)
			PyMem_Free(m->eq[v].buf);
		PyMem_Free(m->eq);
		PyMem_Free(m->lockq.buf);
		PyMem_Free(m->lat);
	}
	PyMem_Free(h->vm);
	PyMem_Free(h->task);
	PyMem_Free(h->cum_grp);
	PyMem_Free(h->mark_all);
	PyMem_Free(h->mark_grp);
	Py_TYPE(h)->tp_free((PyObject *)h);
}

static int Host_init(Host *h, PyObject *args, PyObject *kw)
{
	PyObject *sibs;
	struct params *p = &h->p;
	int c;

	(void)kw;
	if (!PyArg_ParseTuple(args, "O(dddddddddddddddiddddddddddddiidd)", &sibs,
			      &p->smt_slow, &p->smt_cross, &p->smt_emu,
			      &p->smt_poll,
			      &p->sw_base, &p->sw_vm_in,
			      &p->sw_vm_out, &p->lat, &p->min_gran,
			      &p->wake_gran, &p->g_lat, &p->g_min_gran,
			      &p->g_wake_gran, &p->g_sw, &p->halt_poll,
			      &p->max_outstanding, &p->cache_refill,
			      &p->cache_decay, &p->cache_same_group,
			      &p->cold_slow, &p->emu_footprint, &p->emu_wakeup,
			      &p->irq_inject, &p->lock_spin,
			      &p->migration_cost, &p->balance_tick,
			      &p->g_mig, &p->g_tick, &p->emu_queues,
			      &p->irq_coalesce, &p->hotplug,
			      &p->vcpu_tlb_share))
		return -1;
	if (p->cache_decay <= 0) {
		PyErr_SetString(PyExc_ValueError, "cache_decay must be > 0");
		return -1;
	}
	if (p->g_mig > 0 && p->g_tick <= 0) {
		PyErr_SetString(PyExc_ValueError, "guest tick must be > 0");
		return -1;
	}
	if (!PySequence_Check(sibs)) {
		PyErr_SetString(PyExc_TypeError, "siblings: sequence");
		return -1;
	}
	h->ncpu = (int)PySequence_Size(sibs);
	if (h->ncpu < 1 || h->ncpu > MAXCPU) {
		PyErr_SetString(PyExc_ValueError, "1..64 logical CPUs");
		return -1;
	}
	h->all_mask = h->ncpu == 64 ? ~0ULL : (1ULL << h->ncpu) - 1;
	for (c = 0; c < h->ncpu; c++) {
		PyObject *o = PySequence_GetItem(sibs, c);

		h->cpu[c].sib = o ? (int)PyLong_AsLong(o) : -1;
		Py_XDECREF(o);
		h->cpu[c].core = h->cpu[c].sib >= 0 && h->cpu[c].sib < c ?
			h->cpu[c].sib : c;
		h->cpu[c].curr = -1;
		h->next_at[c] = T_INF;
		h->cpu[c].idle_since = 0;
		h->cpu[c].avg_idle = 2 * p->migration_cost;
		h->cpu[c].rate = 1.0;
		h->cpu[c].speed = 1.0;
	}
	h->stuck_limit = STUCK_EVENTS;
	if (PyErr_Occurred())
		return -1;
	return 0;
}

static PyObject *Host_add_vm(Host *h, PyObject *args)
{
	int nvcpu, nthr, nemu, be, kind, rounds, i, cap;
	double mean, a, b, ein, eout, chunk, io, irq, lock, fp, sens;
	unsigned long long seed;
	struct vm *m, *nv;
	struct task *nt;

	if (!PyArg_ParseTuple(args, "iiiiidddiddddddddK", &nvcpu, &nthr,
			      &nemu, &be, &kind, &mean, &a, &b, &rounds, &ein,
			      &eout, &chunk, &io, &irq, &lock, &fp, &sens,
			      &seed))
		return NULL;
	if (nvcpu < 1 || nvcpu > 64 || nthr < 1 || nthr > 1024 || nemu < 1 ||
	    nemu > 16 || rounds < 1 || lock < 0 || lock >= 1 || fp < 0 ||
	    sens < 0) {
		PyErr_SetString(PyExc_ValueError, "bad VM shape");
		return NULL;
	}
	nv = PyMem_Realloc(h->vm, (h->nvm + 1) * sizeof(*nv));
	if (!nv)
		return PyErr_NoMemory();
	h->vm = nv;
	nt = PyMem_Realloc(h->task, (h->ntask + nvcpu + nemu) * sizeof(*nt));
	if (!nt)
		return PyErr_NoMemory();
	h->task = nt;
	if (grow_marks(h, h->ntask + nvcpu + nemu, h->nvm + 1))
		return PyErr_NoMemory();
	m = &h->vm[h->nvm];
	memset(m, 0, sizeof(*m));
	m->nvcpu = nvcpu;
	m->online = nvcpu;
	m->hp_target = nvcpu;
	m->hp_v = -1;
	m->nemu = nemu;
	m->nthr = nthr;
	m->be = be;
	m->svc_kind = kind;
	m->svc_mean = mean;
	m->svc_a = a;
	m->svc_b = b;
	m->rounds = rounds;
	m->emu_in = ein;
	m->emu_out = eout;
	m->be_chunk = chunk;
	m->be_io = io;
	m->irq_cost = irq;
	m->lock_share = lock;
	m->lock_owner = -1;
	m->footprint = fp;
	m->emu_sens = sens;
	m->rng = seed;
	m->next_arr = T_INF;
	m->t_vcpu0 = h->ntask;
	m->t_emu0 = h->ntask + nvcpu;
	for (i = 0; i < nvcpu + nemu; i++) {
		struct task *t = &h->task[h->ntask + i];

		memset(t, 0, sizeof(*t));
		t->kind = i < nvcpu ? K_VCPU : K_EMU;
		t->vm = h->nvm;
		t->idx = i < nvcpu ? i : i - nvcpu;
		t->state = S_SLEEP;
		t->left = h->now - (tns)(1e18);	/* long ago: not cache-hot */
		t->cpu = (h->ntask + i) % h->ncpu;
		t->mask = h->all_mask;
		t->item = -1;
	}
	h->ntask += nvcpu + nemu;
	h->nvm++;
	m->gv = PyMem_Calloc(nvcpu, sizeof(*m->gv));
	for (i = 0; m->gv && i < nvcpu; i++)
		h->task[m->t_vcpu0 + i].g = &m->gv[i];
	m->gt = PyMem_Calloc(nthr, sizeof(*m->gt));
	m->tq = PyMem_Calloc(nthr, sizeof(*m->tq));
	cap = h->p.max_outstanding + 1;
	m->req = PyMem_Calloc(cap, sizeof(*m->req));
	m->free = PyMem_Calloc(cap, sizeof(int));
	if (!m->gv || !m->gt || !m->tq || !m->req || !m->free ||
	    !(m->eq = PyMem_Calloc(nemu, sizeof(*m->eq))) ||
	    fifo_init(&m->lockq, 64) ||
	    grow_queues(h))
		return PyErr_NoMemory();
	for (i = 0; i < nthr; i++)
		if (fifo_init(&m->tq[i], 64))
			return PyErr_NoMemory();
	for (i = 0; i < nemu; i++)
		if (fifo_init(&m->eq[i], 1024))
			return PyErr_NoMemory();
	for (i = cap - 1; i >= 0; i--)
		m->free[m->nfree++] = i;
	m->nreq_cap = cap;
	for (i = 0; i < nvcpu; i++) {
		m->gv[i].curr = -1;
		m->gv[i].halted_at = -1;
		m->gv[i].avg_idle = 2 * h->p.g_mig;
		m->gv[i].q = PyMem_Calloc(nthr, sizeof(int));
		if (!m->gv[i].q || fifo_init(&m->gv[i].irq, 64))
			return PyErr_NoMemory();
	}
	for (i = 0; i < nthr; i++) {
		m->gt[i].vcpu = i % nvcpu;
		m->gt[i].queue = i % nemu;
		m->gt[i].req = -1;
		m->gt[i].hold = -1;
		m->gt[i].state = S_SLEEP;
		m->gt[i].left = h->now - (tns)(1e18);
	}
	if (be) {
		for (i = 0; i < nthr; i++) {
			m->gt[i].rem = draw(&m->rng, D_EXP, chunk, 0, 0);
			m->gt[i].start = h->now;
			g_wake(h, m, i);
		}
	}
	replan(h);
	return PyLong_FromLong(h->nvm - 1);
}

static struct vm *get_vm(Host *h, int i)
{
	if (i < 0 || i >= h->nvm) {
		PyErr_SetString(PyExc_IndexError, "no such VM");
		return NULL;
	}
	return &h->vm[i];
}

static PyObject *Host_set_rps(Host *h, PyObject *args)
{
	int i;
	double rps;
	struct vm *m;

	if (!PyArg_ParseTuple(args, "id", &i, &rps) || !(m = get_vm(h, i)))
		return NULL;
	if (m->be) {
		PyErr_SetString(PyExc_ValueError, "a BE VM has no request rate");
		return NULL;
	}
	if (m->stopped) {
		PyErr_SetString(PyExc_ValueError, "the VM is stopped");
		return NULL;
	}
	m->rps = rps;
	m->next_arr = rps > 0 ?
		h->now + (tns)ceil(rexp(&m->rng, 1e9 / rps)) : T_INF;
	Py_RETURN_NONE;
}

/*
 * Shut VM i down: no request arrives from now on and a BE worker takes
 * no chunk after its current one; what is in flight drains, then every
 * thread sleeps for good and its CPUs are free.
 */
static PyObject *Host_stop_vm(Host *h, PyObject *args)
{
	int i;
	struct vm *m;

	if (!PyArg_ParseTuple(args, "i", &i) || !(m = get_vm(h, i)))
		return NULL;
	m->stopped = 1;
	m->rps = 0;
	m->next_arr = T_INF;
	Py_RETURN_NONE;
}

/* A little core's CPU runs work at speed times a big core's pace. */
static PyObject *Host_set_speed(Host *h, PyObject *args)
{
	int c;
	double speed;

	if (!PyArg_ParseTuple(args, "id", &c, &speed))
		return NULL;
	if (c < 0 || c >= h->ncpu || !(speed > 0 && speed <= 1.0)) {
		PyErr_SetString(PyExc_ValueError,
				"set_speed: a CPU and a speed in (0, 1]");
		return NULL;
	}
	h->cpu[c].speed = speed;
	h->cpu[c].rate = speed;
	Py_RETURN_NONE;
}

static PyObject *Host_pin(Host *h, PyObject *args)
{
	int i, emu, j;
	unsigned long long mask;
	struct vm *m;

	if (!PyArg_ParseTuple(args, "iiK", &i, &emu, &mask) ||
	    !(m = get_vm(h, i)))
		return NULL;
	mask &= h->all_mask;
	if (!mask) {
		PyErr_SetString(PyExc_ValueError, "empty CPU set");
		return NULL;
	}
	if (emu) {
		for (j = 0; j < m->nemu; j++)
			set_mask(h, m->t_emu0 + j, mask);
	} else {
		for (j = 0; j < m->nvcpu; j++)
			set_mask(h, m->t_vcpu0 + j, mask);
	}
	pull_idle(h);
	replan(h);
	Py_RETURN_NONE;
}

/* vCPU threads of VM i to the SCHED_IDLE class (flag 1) or back. */
static PyObject *Host_set_idle(Host *h, PyObject *args)
{
	int i, flag, j;
	struct vm *m;

	if (!PyArg_ParseTuple(args, "ip", &i, &flag) || !(m = get_vm(h, i)))
		return NULL;
	for (j = 0; j < m->nvcpu; j++) {
		struct task *t = &h->task[m->t_vcpu0 + j];
		struct cpu *p;

		if (t->idle == flag)
			continue;
		touch(h, t->cpu);
		t->idle = flag;
		h->nidle += flag ? 1 : -1;
		p = &h->cpu[t->cpu];
		/* the CPU chooses again between the classes */
		if (t->state != S_SLEEP && p->curr >= 0 && p->nq)
			p->resched = 1;
	}
	replan(h);
	Py_RETURN_NONE;
}

static PyObject *Host_set_online(Host *h, PyObject *args)
{
	int i, n, costed = 0;
	struct vm *m;

	if (!PyArg_ParseTuple(args, "ii|p", &i, &n, &costed) ||
	    !(m = get_vm(h, i)))
		return NULL;
	if (costed)
		set_online_costed(h, m, n);
	else
		set_online(h, m, n);
	replan(h);
	return PyLong_FromLong(online_count(m));
}

static PyObject *Host_advance(Host *h, PyObject *args)
{
	long long dt;

	if (!PyArg_ParseTuple(args, "L", &dt))
		return NULL;
	if (dt < 0) {
		PyErr_SetString(PyExc_ValueError, "time runs forward");
		return NULL;
	}
	/* keeps the GIL: the object must not change under the loop */
	if (run_until(h, h->now + dt) < 0)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *Host_counters(Host *h, PyObject *args)
{
	int i;
	struct vm *m;

	if (!PyArg_ParseTuple(args, "i", &i) || !(m = get_vm(h, i)))
		return NULL;
	return Py_BuildValue("(LLLLLLLLiLLLLLLLLLLL)", m->c.vcpu_cpu,
			     m->c.vcpu_wait, m->c.vcpu_slices, m->c.host_ctxsw,
			     m->c.emu_cpu, m->c.guest_busy, m->c.guest_ctxsw,
			     m->c.done, online_count(m), m->c.dropped,
			     m->c.emu_wait, (long long)m->outstanding,
			     m->c.arrived, m->c.guest_sched_in,
			     m->c.vcpu_poll, m->c.halts, m->c.polls_ok,
			     m->c.emu_wakes, m->c.irqs, m->c.vcpu_guest);
}

static PyObject *Host_take_latencies(Host *h, PyObject *args)
{
	int i;
	struct vm *m;
	PyObject *r;

	if (!PyArg_ParseTuple(args, "i", &i) || !(m = get_vm(h, i)))
		return NULL;
	r = PyBytes_FromStringAndSize((const char *)m->lat,
				      m->nlat * (Py_ssize_t)sizeof(double));
	m->nlat = 0;
	return r;
}

static PyObject *Host_cpu_time(Host *h, PyObject *noargs)
{
	PyObject *l = PyList_New(h->ncpu);
	int c;

	(void)noargs;
	if (!l)
		return NULL;
	for (c = 0; c < h->ncpu; c++)
		PyList_SET_ITEM(l, c, Py_BuildValue("(LLL)", h->cpu[c].busy,
						    h->cpu[c].ovh,
						    h->cpu[c].idle));
	return l;
}

static PyObject *broken(int id, const char *what)
{
	PyErr_Format(PyExc_AssertionError, "%s (%d)", what, id);
	return NULL;
}

/* Cross-check the scheduler structures (for tests). */
static PyObject *Host_check(Host *h, PyObject *noargs)
{
	int c, i, k, v, seen[1024];
	char *where = PyMem_Calloc(h->ntask + 1, 1);

	(void)noargs;
	if (!where)
		return PyErr_NoMemory();
	for (c = 0; c < h->ncpu; c++) {
		struct cpu *p = &h->cpu[c];

		for (i = -1; i < p->nq; i++) {
			k = i < 0 ? p->curr : p->q[i];
			if (k < 0)
				continue;
			if (where[k]++) {
				PyMem_Free(where);
				return broken(k, "thread on two CPUs");
			}
			if (h->task[k].cpu != c ||
			    h->task[k].state != (i < 0 ? S_RUNNING : S_RUNNABLE) ||
			    !(h->task[k].mask >> c & 1)) {
				PyMem_Free(where);
				return broken(k, "thread state, CPU or affinity");
			}
		}
	}
	for (k = 0; k < h->ntask; k++) {
		if ((h->task[k].state != S_SLEEP) != (where[k] != 0)) {
			PyMem_Free(where);
			return broken(k, "runnable thread on no CPU");
		}
	}
	PyMem_Free(where);
	for (i = 0; i < h->nvm; i++) {
		struct vm *m = &h->vm[i];

		memset(seen, 0, sizeof(seen));
		for (v = 0; v < m->nvcpu; v++) {
			struct gvcpu *g = &m->gv[v];
			int j;

			if (v >= m->online &&
			    (g->curr >= 0 || g->nq || g->in_irq ||
			     g->irq.len || (!g->hp &&
			     h->task[m->t_vcpu0 + v].state != S_SLEEP)))
				return broken(v, "offline vCPU in use");
			if (g->hp && v != m->hp_v)
				return broken(v, "hotplug on the wrong vCPU");
			if (h->task[m->t_vcpu0 + v].state == S_SLEEP &&
			    (g->curr >= 0 || g->nq || g->in_irq || g->hp ||
			     g->irq.len || g->poll_end))
				return broken(v, "halted vCPU has guest work");
			for (j = -1; j < g->nq; j++) {
				int th = j < 0 ? g->curr : g->q[j];

				if (th < 0)
					continue;
				if (seen[th]++ || m->gt[th].vcpu != v ||
				    m->gt[th].state !=
				    (j < 0 ? S_RUNNING : S_RUNNABLE))
					return broken(th, "guest thread state");
			}
		}
		for (k = 0; k < m->nthr; k++)
			if ((m->gt[k].state != S_SLEEP) != (seen[k] != 0))
				return broken(k, "runnable guest thread lost");
	}
	Py_RETURN_NONE;
}

static PyObject *Host_get_now(Host *h, void *closure)
{
	(void)closure;
	return PyLong_FromLongLong(h->now);
}

static PyMethodDef Host_methods[] = {
	{"add_vm", (PyCFunction)Host_add_vm, METH_VARARGS,
	 "add_vm(vcpus, threads, emu_threads, be, svc_kind, svc_mean, a, b, "
	 "rounds, emu_in_ns, emu_out_ns, be_chunk_ns, be_io_ns, irq_ns, "
	 "lock_share, cache_footprint, smt_emu_sensitivity, seed)"
	 " -> id"},
	{"set_rps", (PyCFunction)Host_set_rps, METH_VARARGS,
	 "set_rps(vm, rps)"},
	{"stop_vm", (PyCFunction)Host_stop_vm, METH_VARARGS,
	 "stop_vm(vm): no new work; its threads sleep once drained"},
	{"pin", (PyCFunction)Host_pin, METH_VARARGS,
	 "pin(vm, emulator, cpu_mask)"},
	{"set_speed", (PyCFunction)Host_set_speed, METH_VARARGS,
	 "set_speed(cpu, speed): before any VM runs"},
	{"set_idle", (PyCFunction)Host_set_idle, METH_VARARGS,
	 "set_idle(vm, flag): vCPU threads to SCHED_IDLE (True) or back"},
	{"set_online", (PyCFunction)Host_set_online, METH_VARARGS,
	 "set_online(vm, n, hotplug=False) -> online vCPUs"},
	{"advance", (PyCFunction)Host_advance, METH_VARARGS,
	 "advance(ns)"},
	{"counters", (PyCFunction)Host_counters, METH_VARARGS,
	 "counters(vm) -> tuple of cumulative counters"},
	{"take_latencies", (PyCFunction)Host_take_latencies, METH_VARARGS,
	 "take_latencies(vm) -> bytes of float64 microseconds"},
	{"cpu_time", (PyCFunction)Host_cpu_time, METH_NOARGS,
	 "cpu_time() -> [(busy_ns, overhead_ns, idle_ns)] per CPU"},
	{"check", (PyCFunction)Host_check, METH_NOARGS,
	 "check(): raise AssertionError if the run queues are inconsistent"},
	{NULL, NULL, 0, NULL}
};

static PyObject *Host_get_stuck(Host *h, void *closure)
{
	(void)closure;
	return PyLong_FromLongLong(h->stuck_limit);
}

static int Host_set_stuck(Host *h, PyObject *v, void *closure)
{
	long long n = v ? PyLong_AsLongLong(v) : -1;

	(void)closure;
	if (n < 0) {
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_ValueError, "a count >= 0");
		return -1;
	}
	h->stuck_limit = n;
	return 0;
}

static PyGetSetDef Host_getset[] = {
	{"now", (getter)Host_get_now, NULL, "simulated ns", NULL},
	{"stuck_limit", (getter)Host_get_stuck, (setter)Host_set_stuck,
	 "events in a row at one instant before advance() raises "
	 "RuntimeError (livelock guard)", NULL},
	{NULL, NULL, NULL, NULL, NULL}
};

static PyTypeObject HostType = {
	PyVarObject_HEAD_INIT(NULL, 0)
	.tp_name = "ufo_sim.engine._core.Host",
	.tp_basicsize = sizeof(Host),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Host(siblings, params): the discrete-event host model",
	.tp_new = PyType_GenericNew,
	.tp_init = (initproc)Host_init,
	.tp_dealloc = (destructor)Host_dealloc,
	.tp_methods = Host_methods,
	.tp_getset = Host_getset,
};

static struct PyModuleDef coremod = {
	PyModuleDef_HEAD_INIT, "_core",
	"Hot loop of the ufo_sim host model.", -1, NULL,
	NULL, NULL, NULL, NULL
};

PyMODINIT_FUNC PyInit__core(void)
{
	PyObject *mod;

	if (PyType_Ready(&HostType) < 0)
		return NULL;
	mod = PyModule_Create(&coremod);
	if (!mod)
		return NULL;
	Py_INCREF(&HostType);
	if (PyModule_AddObject(mod, "Host", (PyObject *)&HostType) < 0) {
		Py_DECREF(&HostType);
		Py_DECREF(mod);
		return NULL;
	}
	return mod;
}
