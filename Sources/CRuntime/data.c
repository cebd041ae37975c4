/*
 * SwiftQueues — data objects.
 *
 * Two shapes, as in libdispatch:
 *   - a leaf owns one buffer (and its destructor);
 *   - a composite is a flat list of ranges {leaf, from, length}.
 * Concat and subrange build composites from the ranges of their inputs, so
 * a composite never points at another composite: apply is a plain loop and
 * nothing is ever copied. The leaf's destructor runs when its last
 * reference, the program's or a range list's, goes: exactly once.
 *
 * Range lists. A composite of more than one range names a prefix of a
 * shared, append-only range list (struct sq_data_rbuf_s) that holds one
 * reference on the leaf of each of its slots. Concatenating onto a
 * composite whose prefix ends where the list's used part ends claims the
 * next slots with one compare-and-swap and writes only the new ranges, so
 * growing an object piece by piece (d = concat(d, piece)) costs O(1)
 * amortised per piece instead of copying every range each time; a full
 * list is copied once into one twice as large. A composite disposed while
 * its slots are still the last ones gives them back (the same CAS, the
 * other way), so an appended piece nobody names any more is released at
 * once; slots below a live composite's prefix are released with the list.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct sq_data_range_s {
	struct sq_data_s *leaf;
	size_t from;
	size_t length;
};

/* A shared, append-only range list. Slots below `used` never change while
 * a composite names them; `used` moves by CAS only (see sq_data_s). */
struct sq_data_rbuf_s {
	size_t refs;              /* composites naming it; atomic */
	size_t used;              /* slots claimed; atomic */
	size_t cap;
	struct sq_data_range_s r[];
};

/* Rollback on dispose gives back at most this many appended slots. */
#define SQ_DATA_ROLLBACK_MAX 16

enum {
	SQ_DATA_D_NONE = 0,   /* composites, sq_data_empty */
	SQ_DATA_D_FREE = 1,   /* free(buf) */
	SQ_DATA_D_MUNMAP = 2, /* munmap(buf, size) */
	SQ_DATA_D_CUSTOM = 3, /* destructor(dctx) on dqueue */
};

struct sq_data_s {
	struct sq_object_s obj;
	size_t size;
	/* Leaves. */
	const void *buf;
	uint8_t dkind;            /* SQ_DATA_D_* */
	sq_function_t destructor; /* SQ_DATA_D_CUSTOM */
	void *dctx;               /* the destructor's argument */
	sq_queue_t dqueue;        /* SQ_DATA_D_CUSTOM: retained */
	/* Composites: nranges > 0. One range lives in `one` (its leaf
	 * retained by the composite); more are the prefix [0, nranges) of
	 * `rb`, of which [n0, nranges) were appended by this composite. */
	size_t nranges;
	const struct sq_data_range_s *ranges;
	struct sq_data_rbuf_s *rb;
	size_t n0;
	struct sq_data_range_s one;
};

void
_sq_data_destructor_free(void *buffer)
{
	free(buffer);
}

void
_sq_data_destructor_munmap(void *buffer)
{
	(void)buffer; /* a marker only: dispose knows the size */
}

static void
_sq_data_rbuf_release(struct sq_data_rbuf_s *rb)
{
	/* acq_rel: every sharer's reads of the slots happen before the last
	 * one frees them. */
	if (__atomic_sub_fetch(&rb->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	size_t used = __atomic_load_n(&rb->used, __ATOMIC_RELAXED);
	for (size_t i = 0; i < used; i++)
		sq_release(rb->r[i].leaf);
	free(rb);
}

/* A composite of several ranges goes: if its appended slots are still
 * the list's last ones, hand them back (and their leaves) at once. */
static void
_sq_data_rbuf_drop(struct sq_data_s *d)
{
	struct sq_data_rbuf_s *rb = d->rb;
	size_t k = d->nranges - d->n0;
	if (k > 0 && k <= SQ_DATA_ROLLBACK_MAX) {
		/* Read the leaves first: once `used` goes down, an append may
		 * overwrite the slots. acq_rel pairs with the append's CAS, so
		 * these reads happen before its writes. */
		struct sq_data_s *leaves[SQ_DATA_ROLLBACK_MAX];
		for (size_t i = 0; i < k; i++)
			leaves[i] = rb->r[d->n0 + i].leaf;
		size_t expect = d->nranges;
		if (__atomic_compare_exchange_n(&rb->used, &expect, d->n0,
				false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			for (size_t i = 0; i < k; i++)
				sq_release(leaves[i]);
		}
	}
	_sq_data_rbuf_release(rb);
}

static void
_sq_data_dispose(struct sq_object_s *o)
{
	struct sq_data_s *d = (struct sq_data_s *)o;
	if (d->rb != NULL)
		_sq_data_rbuf_drop(d);
	else if (d->nranges == 1)
		sq_release(d->one.leaf);
	switch (d->dkind) {
	case SQ_DATA_D_FREE:
		free((void *)d->buf);
		break;
	case SQ_DATA_D_MUNMAP:
		munmap((void *)d->buf, d->size);
		break;
	case SQ_DATA_D_CUSTOM:
		sq_async_f(d->dqueue, d->dctx, d->destructor);
		sq_release(d->dqueue);
		break;
	}
	_sq_object_free(o);
}

/* sq_debug: the size and how many regions make it up. */
static size_t
_sq_data_debug(struct sq_object_s *object, char *buf, size_t size)
{
	struct sq_data_s *d = (struct sq_data_s *)object;
	int n = snprintf(buf, size, "size = %zu, regions = %zu", d->size,
			d->nranges ? d->nranges : (d->size ? 1 : 0));
	return n < 0 ? 0 : (size_t)n;
}

static const struct sq_vtable_s _sq_data_vtable = {
	.kind = "data",
	.dispose = _sq_data_dispose,
	.debug = _sq_data_debug,
};

struct sq_data_s _sq_data_empty = {
	.obj = {
		.vtable = &_sq_data_vtable,
		.xref = SQ_REF_IMMORTAL,
		.ref = SQ_REF_IMMORTAL,
	},
};

static struct sq_data_s *
_sq_data_alloc(void)
{
	return _sq_object_alloc(&_sq_data_vtable, sizeof(struct sq_data_s));
}

/* A new range list with room for `cap` slots, none used. */
static struct sq_data_rbuf_s *
_sq_data_rbuf_new(size_t cap)
{
	if (cap > (SIZE_MAX - sizeof(struct sq_data_rbuf_s)) /
			sizeof(struct sq_data_range_s))
		_sq_client_crash("sq_data", "too many regions");
	struct sq_data_rbuf_s *rb = malloc(sizeof(*rb) +
			cap * sizeof(struct sq_data_range_s));
	if (rb == NULL)
		_sq_client_crash("sq_data", "out of memory");
	rb->refs = 1;
	rb->used = 0;
	rb->cap = cap;
	return rb;
}

/* A composite naming the prefix [0, n) of `rb` (taking over a reference
 * on it), of which it appended [n0, n). */
static struct sq_data_s *
_sq_data_composite(struct sq_data_rbuf_s *rb, size_t n0, size_t n,
		size_t size)
{
	struct sq_data_s *d = _sq_data_alloc();
	d->size = size;
	d->nranges = n;
	d->ranges = rb->r;
	d->rb = rb;
	d->n0 = n0;
	return d;
}

/* Copies `n` ranges into slots from `at` on, retaining their leaves. */
static void
_sq_data_put(struct sq_data_rbuf_s *rb, size_t at,
		const struct sq_data_range_s *r, size_t n)
{
	memcpy(rb->r + at, r, n * sizeof(*r));
	for (size_t i = 0; i < n; i++)
		sq_retain(r[i].leaf);
}

static struct sq_data_s *
_sq_data_leaf(const void *buf, size_t size, uint8_t dkind, sq_queue_t queue,
		void *dctx, sq_function_t destructor)
{
	struct sq_data_s *d = _sq_data_alloc();
	d->size = size;
	d->buf = buf;
	d->dkind = dkind;
	if (dkind == SQ_DATA_D_CUSTOM) {
		if (queue == NULL)
			queue = sq_get_global_queue(SQ_QUEUE_PRIORITY_DEFAULT, 0);
		sq_retain(queue);
		d->dqueue = queue;
		d->destructor = destructor;
		d->dctx = dctx;
	}
	return d;
}

sq_data_t
sq_data_create_f(const void *buffer, size_t size, sq_queue_t queue,
		sq_function_t destructor)
{
	uint8_t kind = destructor == _sq_data_destructor_free ? SQ_DATA_D_FREE
			: destructor == _sq_data_destructor_munmap ?
			SQ_DATA_D_MUNMAP : SQ_DATA_D_CUSTOM;
	if (size == 0 || buffer == NULL) {
		/* Nothing to hold; the buffer is still given back. */
		if (destructor == NULL)
			return sq_data_empty;
		if (kind == SQ_DATA_D_FREE)
			free((void *)buffer);
		else if (kind == SQ_DATA_D_MUNMAP && buffer != NULL && size > 0)
			munmap((void *)buffer, size);
		else if (kind == SQ_DATA_D_CUSTOM)
			sq_async_f(queue ? queue : sq_get_global_queue(
					SQ_QUEUE_PRIORITY_DEFAULT, 0),
					(void *)buffer, destructor);
		return sq_data_empty;
	}
	if (destructor == NULL) {
		void *copy = malloc(size);
		if (copy == NULL)
			_sq_client_crash("sq_data_create_f", "out of memory");
		memcpy(copy, buffer, size);
		return _sq_data_leaf(copy, size, SQ_DATA_D_FREE, NULL, NULL,
				NULL);
	}
	return _sq_data_leaf(buffer, size, kind, queue, (void *)buffer,
			destructor);
}

sq_data_t
sq_data_create_with_context_f(const void *buffer, size_t size,
		sq_queue_t queue, void *context, sq_function_t destructor)
{
	_SQ_REQUIRE_FUNCTION("sq_data_create_with_context_f", destructor);
	if (destructor == _sq_data_destructor_munmap)
		_sq_client_crash("sq_data_create_with_context_f",
				"SQ_DATA_DESTRUCTOR_MUNMAP needs the buffer: use "
				"sq_data_create_f");
	if (destructor == _sq_data_destructor_free)
		destructor = free; /* free(context), like any function */
	if (size == 0 || buffer == NULL) {
		sq_async_f(queue ? queue : sq_get_global_queue(
				SQ_QUEUE_PRIORITY_DEFAULT, 0), context, destructor);
		return sq_data_empty;
	}
	return _sq_data_leaf(buffer, size, SQ_DATA_D_CUSTOM, queue, context,
			destructor);
}

size_t
sq_data_get_size(sq_data_t data)
{
	_sq_object_validate("sq_data_get_size", data);
	return data->size;
}

/* The ranges of `d`, a leaf being its own single range. */
static inline const struct sq_data_range_s *
_sq_data_ranges(struct sq_data_s *d, struct sq_data_range_s *tmp, size_t *n)
{
	if (d->nranges > 0) {
		*n = d->nranges;
		return d->ranges;
	}
	tmp->leaf = d;
	tmp->from = 0;
	tmp->length = d->size;
	*n = d->size > 0 ? 1 : 0;
	return tmp;
}

/* A data object for exactly one range: the leaf itself when the range
 * covers it, else a one-range composite. Returns a new reference. */
static struct sq_data_s *
_sq_data_for_range(const struct sq_data_range_s *r)
{
	if (r->from == 0 && r->length == r->leaf->size) {
		sq_retain(r->leaf);
		return r->leaf;
	}
	struct sq_data_s *d = _sq_data_alloc();
	d->size = r->length;
	d->nranges = 1;
	d->one = *r;
	d->ranges = &d->one;
	sq_retain(r->leaf);
	return d;
}

sq_data_t
sq_data_create_concat(sq_data_t a, sq_data_t b)
{
	_sq_object_validate("sq_data_create_concat", a);
	_sq_object_validate("sq_data_create_concat", b);
	if (a->size == 0) {
		sq_retain(b);
		return b;
	}
	if (b->size == 0) {
		sq_retain(a);
		return a;
	}
	if (SQ_UNLIKELY(a->size > SIZE_MAX - b->size))
		_sq_client_crash("sq_data_create_concat", "size overflows");
	struct sq_data_range_s ta, tb;
	size_t na, nb;
	const struct sq_data_range_s *ra = _sq_data_ranges(a, &ta, &na);
	const struct sq_data_range_s *rb = _sq_data_ranges(b, &tb, &nb);
	size_t size = a->size + b->size;
	struct sq_data_rbuf_s *list = a->rb;
	if (list != NULL && list->cap - na >= nb) {
		/* `a` ends where the list's used part may end: claim the next
		 * slots. acq_rel pairs with a rollback's CAS (see dispose). */
		size_t expect = na;
		if (__atomic_compare_exchange_n(&list->used, &expect, na + nb,
				false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
			_sq_data_put(list, na, rb, nb);
			__atomic_add_fetch(&list->refs, 1, __ATOMIC_RELAXED);
			return _sq_data_composite(list, na, na + nb, size);
		}
	}
	/* A new list, with room to grow: amortised O(1) appends. */
	if (na + nb > SIZE_MAX / 2)
		_sq_client_crash("sq_data_create_concat", "too many regions");
	list = _sq_data_rbuf_new(2 * (na + nb) < 4 ? 4 : 2 * (na + nb));
	_sq_data_put(list, 0, ra, na);
	_sq_data_put(list, na, rb, nb);
	list->used = na + nb;
	return _sq_data_composite(list, 0, na + nb, size);
}

/* The index of the range holding byte `location` (< size) and that range's
 * offset in the whole. Binary search would need a prefix array; ranges are
 * few in practice (one per read chunk), so a walk it is. */
static size_t
_sq_data_find(const struct sq_data_range_s *r, size_t n, size_t location,
		size_t *start)
{
	size_t pos = 0;
	for (size_t i = 0; i < n; i++) {
		if (location < pos + r[i].length) {
			*start = pos;
			return i;
		}
		pos += r[i].length;
	}
	*start = pos;
	return n;
}

sq_data_t
sq_data_create_subrange(sq_data_t data, size_t offset, size_t length)
{
	_sq_object_validate("sq_data_create_subrange", data);
	if (offset >= data->size || length == 0)
		return sq_data_empty;
	if (length > data->size - offset)
		length = data->size - offset;
	if (offset == 0 && length == data->size) {
		sq_retain(data);
		return data;
	}
	struct sq_data_range_s tmp;
	size_t n, start;
	const struct sq_data_range_s *r = _sq_data_ranges(data, &tmp, &n);
	size_t first = _sq_data_find(r, n, offset, &start);
	size_t skip = offset - start;
	/* Count the ranges the subrange touches. */
	size_t count = 0, left = length + skip;
	for (size_t i = first; i < n && left > 0; i++) {
		count++;
		left -= left < r[i].length ? left : r[i].length;
	}
	if (count == 1) {
		struct sq_data_range_s one = {
			r[first].leaf, r[first].from + skip, length };
		return _sq_data_for_range(&one);
	}
	struct sq_data_rbuf_s *list = _sq_data_rbuf_new(count);
	left = length;
	for (size_t i = 0; i < count; i++) {
		struct sq_data_range_s x = r[first + i];
		if (i == 0) {
			x.from += skip;
			x.length -= skip;
		}
		if (x.length > left)
			x.length = left;
		left -= x.length;
		list->r[i] = x;
		sq_retain(x.leaf);
	}
	list->used = count;
	return _sq_data_composite(list, 0, count, length);
}

sq_data_t
sq_data_create_map(sq_data_t data, const void **buffer_ptr, size_t *size_ptr)
{
	_sq_object_validate("sq_data_create_map", data);
	struct sq_data_s *d;
	const void *p;
	if (data->size == 0) {
		d = sq_data_empty;
		p = NULL;
	} else if (data->nranges == 0) {
		sq_retain(data);
		d = data;
		p = data->buf;
	} else if (data->nranges == 1) {
		sq_retain(data);
		d = data;
		p = (const char *)data->ranges[0].leaf->buf +
				data->ranges[0].from;
	} else {
		char *buf = malloc(data->size);
		if (buf == NULL)
			_sq_client_crash("sq_data_create_map", "out of memory");
		size_t pos = 0;
		for (size_t i = 0; i < data->nranges; i++) {
			const struct sq_data_range_s *r = &data->ranges[i];
			memcpy(buf + pos, (const char *)r->leaf->buf + r->from,
					r->length);
			pos += r->length;
		}
		d = _sq_data_leaf(buf, data->size, SQ_DATA_D_FREE, NULL, NULL,
				NULL);
		p = buf;
	}
	if (buffer_ptr)
		*buffer_ptr = p;
	if (size_ptr)
		*size_ptr = d->size;
	return d;
}

bool
sq_data_apply_f(sq_data_t data, void *context,
		sq_data_applier_function_t applier)
{
	_sq_object_validate("sq_data_apply_f", data);
	_SQ_REQUIRE_FUNCTION("sq_data_apply_f", applier);
	if (data->size == 0)
		return true;
	if (data->nranges == 0)
		return applier(context, data, 0, data->buf, data->size);
	size_t pos = 0;
	for (size_t i = 0; i < data->nranges; i++) {
		const struct sq_data_range_s *r = &data->ranges[i];
		const char *p = (const char *)r->leaf->buf + r->from;
		bool go;
		if (data->nranges == 1) {
			go = applier(context, data, pos, p, r->length);
		} else {
			struct sq_data_s *region = _sq_data_for_range(r);
			go = applier(context, region, pos, p, r->length);
			sq_release(region);
		}
		if (!go)
			return false;
		pos += r->length;
	}
	return true;
}

sq_data_t
sq_data_copy_region(sq_data_t data, size_t location, size_t *offset_ptr)
{
	_sq_object_validate("sq_data_copy_region", data);
	if (location >= data->size) {
		if (offset_ptr)
			*offset_ptr = data->size;
		return sq_data_empty;
	}
	struct sq_data_range_s tmp;
	size_t n, start;
	const struct sq_data_range_s *r = _sq_data_ranges(data, &tmp, &n);
	size_t i = _sq_data_find(r, n, location, &start);
	if (offset_ptr)
		*offset_ptr = start;
	if (n == 1) {
		sq_retain(data);
		return data;
	}
	return _sq_data_for_range(&r[i]);
}
