/*
 * SwiftQueues — what the runtime's looks (the watchdog, snapshots) last
 * saw of each queue that had work waiting: a table beside the queues
 * (introspect_internal.h, "Looks"), so a queue costs no bytes for it.
 */
#include "introspect_internal.h"

#include <stdlib.h>

#define SQ_LOOK_MIN 64 /* slots */

static struct {
	struct sq_look_s *slots;
	uint32_t cap;  /* a power of two, or 0 */
	uint32_t used;
} _sq_looks;

static inline uint32_t
_sq_look_home(struct sq_queue_s *q)
{
	uint64_t h = (uint64_t)(uintptr_t)q * 0x9e3779b97f4a7c15ull;
	return (uint32_t)(h >> 32) & (_sq_looks.cap - 1);
}

struct sq_look_s *
_sq_look_find(struct sq_queue_s *q)
{
	if (_sq_looks.used == 0)
		return NULL;
	uint32_t mask = _sq_looks.cap - 1;
	for (uint32_t i = _sq_look_home(q);; i = (i + 1) & mask) {
		if (_sq_looks.slots[i].queue == q)
			return &_sq_looks.slots[i];
		if (_sq_looks.slots[i].queue == NULL)
			return NULL;
	}
}

/* Moves the records to a table of `cap` slots (false: out of memory, the
 * table unchanged). */
static bool
_sq_look_resize(uint32_t cap)
{
	struct sq_look_s *slots = calloc(cap, sizeof(*slots));
	if (slots == NULL)
		return false;
	struct sq_look_s *old = _sq_looks.slots;
	uint32_t old_cap = _sq_looks.cap;
	_sq_looks.slots = slots;
	_sq_looks.cap = cap;
	for (uint32_t i = 0; i < old_cap; i++) {
		if (old[i].queue == NULL)
			continue;
		uint32_t j = _sq_look_home(old[i].queue);
		while (slots[j].queue != NULL)
			j = (j + 1) & (cap - 1);
		slots[j] = old[i];
	}
	free(old);
	return true;
}

/* q's record, made if it has none (*made set; NULL: out of memory). At
 * most half the slots are used. */
struct sq_look_s *
_sq_look_get(struct sq_queue_s *q, bool *made)
{
	struct sq_look_s *l = _sq_look_find(q);
	*made = l == NULL;
	if (l != NULL)
		return l;
	if ((_sq_looks.used + 1) * 2 > _sq_looks.cap &&
			!_sq_look_resize(_sq_looks.cap ? _sq_looks.cap * 2
			: SQ_LOOK_MIN))
		return NULL;
	uint32_t i = _sq_look_home(q);
	while (_sq_looks.slots[i].queue != NULL)
		i = (i + 1) & (_sq_looks.cap - 1);
	_sq_looks.used++;
	_sq_looks.slots[i] = (struct sq_look_s){ .queue = q };
	return &_sq_looks.slots[i];
}

/* Drops q's record, if any: the records after it in its run move back so
 * that a search never stops at the hole. */
void
_sq_look_drop(struct sq_queue_s *q)
{
	struct sq_look_s *l = _sq_look_find(q);
	if (l == NULL)
		return;
	uint32_t mask = _sq_looks.cap - 1;
	uint32_t hole = (uint32_t)(l - _sq_looks.slots);
	for (uint32_t i = (hole + 1) & mask; _sq_looks.slots[i].queue != NULL;
			i = (i + 1) & mask) {
		/* A record may fill the hole if the hole lies on its path:
		 * between its home and where it sits, cyclically. */
		uint32_t home = _sq_look_home(_sq_looks.slots[i].queue);
		if (((i - home) & mask) >= ((i - hole) & mask)) {
			_sq_looks.slots[hole] = _sq_looks.slots[i];
			hole = i;
		}
	}
	_sq_looks.slots[hole].queue = NULL;
	_sq_looks.used--;
	/* A burst of waiting queues does not keep its table: below an eighth
	 * used, a quarter of the slots (if that fails, the table stays). */
	if (_sq_looks.cap > SQ_LOOK_MIN && _sq_looks.used * 8 < _sq_looks.cap)
		(void)_sq_look_resize(_sq_looks.cap / 4);
}
