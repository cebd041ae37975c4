/*
 * SwiftQueues — a work item as a block. libdispatch's dispatch_block_create
 * hands the program a block it calls, copies, submits and later passes to
 * dispatch_block_wait / notify / cancel; sq_workitem_block makes such a
 * block for a work item and sq_workitem_from_block finds the item again.
 *
 * The library is plain C (no -fblocks), so the block is laid out by hand
 * after the Blocks ABI (clang's "Block Implementation Specification"): a
 * stack-block template whose one captured variable is the item, moved to
 * the heap by the runtime's _Block_copy. Its copy helper retains the item
 * and its dispose helper releases it, so the item lives exactly as long as
 * the last copy of the block. A block is ours when its invoke function is
 * _sq_workitem_block_invoke (exported so sq_async's inline test can compare
 * without a call).
 *
 * The Blocks runtime is looked up when first needed rather than linked:
 * programs without blocks do not carry it, and those with blocks have it
 * loaded (they call _Block_copy themselves).
 */
#include "queue_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <string.h>

/* The Blocks ABI's flags and layout. */
#define _SQ_BLOCK_HAS_COPY_DISPOSE (1 << 25)
#define _SQ_BLOCK_HAS_SIGNATURE (1 << 30)

struct _sq_workitem_block;

struct _sq_block_descriptor {
	unsigned long reserved;
	unsigned long size;
	void (*copy)(void *dst, const void *src);
	void (*dispose)(const void *block);
	const char *signature;
};

struct _sq_workitem_block {
	void *isa;
	int flags;
	int reserved;
	void (*invoke)(void *block);
	const struct _sq_block_descriptor *descriptor;
	struct sq_workitem_s *item; /* the captured variable */
};

void
_sq_workitem_block_invoke(void *block)
{
	sq_workitem_perform(((struct _sq_workitem_block *)block)->item);
}

/* _Block_copy moved the template (or a copy) to the heap: the new block
 * holds a reference of its own. */
static void
_sq_workitem_block_copy(void *dst, const void *src)
{
	(void)src;
	sq_retain(((struct _sq_workitem_block *)dst)->item);
}

/* The last _Block_release of a heap copy. */
static void
_sq_workitem_block_dispose(const void *block)
{
	sq_release(((const struct _sq_workitem_block *)block)->item);
}

static const struct _sq_block_descriptor _sq_workitem_block_descriptor = {
	.reserved = 0,
	.size = sizeof(struct _sq_workitem_block),
	.copy = _sq_workitem_block_copy,
	.dispose = _sq_workitem_block_dispose,
	.signature = "v8@?0", /* void (^)(void) */
};

static pthread_once_t _sq_blocks_runtime_once = PTHREAD_ONCE_INIT;
static void *_sq_stack_block_isa;
static void *(*_sq_block_copy_fn)(const void *block);

static void
_sq_blocks_runtime_lookup(void)
{
	_sq_stack_block_isa = dlsym(RTLD_DEFAULT, "_NSConcreteStackBlock");
	void *copy = dlsym(RTLD_DEFAULT, "_Block_copy");
	memcpy(&_sq_block_copy_fn, &copy, sizeof(copy));
}

void *
sq_workitem_block(sq_workitem_t item)
{
	_sq_object_validate("sq_workitem_block", item);
	/* pthread_once orders the lookup's stores before our loads. */
	pthread_once(&_sq_blocks_runtime_once, _sq_blocks_runtime_lookup);
	if (SQ_UNLIKELY(_sq_stack_block_isa == NULL ||
			_sq_block_copy_fn == NULL)) {
		_sq_client_crash("sq_workitem_block", "the Blocks runtime is "
				"not loaded (build with clang -fblocks and link "
				"-lBlocksRuntime)");
	}
	struct _sq_workitem_block template = {
		.isa = _sq_stack_block_isa,
		.flags = _SQ_BLOCK_HAS_COPY_DISPOSE | _SQ_BLOCK_HAS_SIGNATURE,
		.reserved = 0,
		.invoke = _sq_workitem_block_invoke,
		.descriptor = &_sq_workitem_block_descriptor,
		.item = item,
	};
	/* The template holds no reference; the copy helper takes one. */
	return _sq_block_copy_fn(&template);
}

sq_workitem_t
sq_workitem_from_block(const void *block)
{
	/* Every block starts with isa, flags, reserved and invoke. */
	const struct _sq_workitem_block *b = block;
	if (block == NULL || b->invoke != _sq_workitem_block_invoke)
		return NULL;
	return b->item;
}

sq_workitem_t
_sq_workitem_for_block(const char *call, const void *block)
{
	sq_workitem_t item = sq_workitem_from_block(block);
	if (SQ_UNLIKELY(item == NULL)) {
		_sq_client_crash(call, block == NULL ? "block is NULL" :
				"the block was not made by sq_block_create");
	}
	return item;
}

bool
_sq_async_workitem_block(sq_queue_t queue, const void *block)
{
	sq_workitem_t item = sq_workitem_from_block(block);
	if (item == NULL)
		return false;
	sq_async_workitem(queue, item);
	return true;
}
