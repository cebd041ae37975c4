/*
 * SwiftQueues — intrusive LIFO and FIFO on liburcu's lfstack and wfcqueue.
 *
 * liburcu's structures are used through its shared library (no _LGPL_SOURCE,
 * see docs/ARCHITECTURE.md), so only its non-blocking calls are used on the
 * consumer side: the blocking ones sleep 10 ms when they meet a producer
 * preempted between its exchange and its link store (liburcu's wfcqueue
 * waits with poll(NULL, 0, 10) there). We spin and yield instead.
 */
#include "internal.h"

#include <urcu/lfstack.h>
#include <urcu/wfcqueue.h>

/* The public structs mirror liburcu's layout; keep them in step. */
_Static_assert(sizeof(sq_lifo_node_t) == sizeof(struct cds_lfs_node),
		"sq_lifo_node_t must match struct cds_lfs_node");
_Static_assert(offsetof(sq_lifo_t, _sq_head) ==
		offsetof(struct __cds_lfs_stack, head),
		"sq_lifo_t must start like struct __cds_lfs_stack");
_Static_assert(sizeof(sq_fifo_node_t) == sizeof(struct cds_wfcq_node),
		"sq_fifo_node_t must match struct cds_wfcq_node");
_Static_assert(sizeof(((sq_fifo_t *)0)->_sq_head) ==
		sizeof(struct __cds_wfcq_head),
		"sq_fifo_t head must match struct __cds_wfcq_head");
_Static_assert(offsetof(sq_fifo_t, _sq_tail) == 64 && sizeof(sq_fifo_t) == 128,
		"sq_fifo_t keeps head and tail 64 bytes apart");
_Static_assert(sizeof(((sq_fifo_t *)0)->_sq_tail) ==
		sizeof(struct cds_wfcq_tail),
		"sq_fifo_t tail must match struct cds_wfcq_tail");

#define LIFO_STACK(l) ((struct __cds_lfs_stack *)(void *)(l))
#define FIFO_HEAD(f) ((struct __cds_wfcq_head *)(void *)&(f)->_sq_head)
#define FIFO_TAIL(f) ((struct cds_wfcq_tail *)(void *)&(f)->_sq_tail)

/* ---- LIFO ---- */

void
sq_lifo_init(sq_lifo_t *lifo)
{
	__cds_lfs_init(LIFO_STACK(lifo));
	lifo->_sq_pop_lock = (sq_spinlock_t)SQ_SPINLOCK_INIT;
}

bool
sq_lifo_push(sq_lifo_t *lifo, void *item, size_t offset)
{
	struct cds_lfs_node *node = (void *)((char *)item + offset);
	_sq_tsan_release(node);
	/* cds_lfs_push: lock-free, full barrier; false means "was empty". */
	return !cds_lfs_push(LIFO_STACK(lifo), node);
}

void *
sq_lifo_pop(sq_lifo_t *lifo, size_t offset)
{
	/* One popper at a time: rules out ABA on the node being popped. */
	sq_spinlock_lock(&lifo->_sq_pop_lock);
	struct cds_lfs_node *node = __cds_lfs_pop(LIFO_STACK(lifo));
	sq_spinlock_unlock(&lifo->_sq_pop_lock);
	if (node == NULL)
		return NULL;
	_sq_tsan_acquire(node);
	return (char *)node - offset;
}

sq_lifo_node_t *
sq_lifo_pop_all(sq_lifo_t *lifo)
{
	/* pop_all conflicts with pop (liburcu's table), not with push. */
	sq_spinlock_lock(&lifo->_sq_pop_lock);
	struct cds_lfs_head *head = __cds_lfs_pop_all(LIFO_STACK(lifo));
	sq_spinlock_unlock(&lifo->_sq_pop_lock);
	if (head == NULL)
		return NULL;
#ifdef SQ_TSAN
	for (struct cds_lfs_node *n = &head->node; n; n = n->next)
		_sq_tsan_acquire(n);
#endif
	return (sq_lifo_node_t *)(void *)&head->node;
}

bool
sq_lifo_empty(sq_lifo_t *lifo)
{
	return cds_lfs_empty(LIFO_STACK(lifo));
}

/* ---- FIFO ---- */

void
sq_fifo_init(sq_fifo_t *fifo)
{
	__cds_wfcq_init(FIFO_HEAD(fifo), FIFO_TAIL(fifo));
	fifo->_sq_dequeue_lock = (sq_spinlock_t)SQ_SPINLOCK_INIT;
}

bool
sq_fifo_enqueue(sq_fifo_t *fifo, void *item, size_t offset)
{
	struct cds_wfcq_node *node = (void *)((char *)item + offset);
	cds_wfcq_node_init(node);
	_sq_tsan_release(node);
	/* Wait-free, full barrier; returns false when the queue was empty. */
	return !cds_wfcq_enqueue(FIFO_HEAD(fifo), FIFO_TAIL(fifo), node);
}

void *
sq_fifo_dequeue(sq_fifo_t *fifo, size_t offset)
{
	struct cds_wfcq_node *node;
	unsigned attempts = 0;

	sq_spinlock_lock(&fifo->_sq_dequeue_lock);
	for (;;) {
		node = __cds_wfcq_dequeue_nonblocking(FIFO_HEAD(fifo),
				FIFO_TAIL(fifo));
		if (node != CDS_WFCQ_WOULDBLOCK)
			break;
		/* A producer swapped the tail but has not linked its node yet;
		 * it is one store away. Spin, then give it our CPU. */
		if (++attempts < 64)
			_sq_cpu_relax();
		else
			sched_yield();
	}
	sq_spinlock_unlock(&fifo->_sq_dequeue_lock);
	if (node == NULL)
		return NULL;
	_sq_tsan_acquire(node);
	return (char *)node - offset;
}

bool
sq_fifo_empty(sq_fifo_t *fifo)
{
	return cds_wfcq_empty(FIFO_HEAD(fifo), FIFO_TAIL(fifo));
}
