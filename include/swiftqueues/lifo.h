/*!
 * \defgroup swiftqueues_lifo Intrusive lock-free LIFO and FIFO
 * \ingroup swiftqueues
 *
 * Intrusive lock-free LIFO and FIFO (the counterparts
 * of OSAtomicEnqueue / OSAtomicFifoEnqueue), built on liburcu.
 *
 * Intrusive: an item carries its own link (an sq_lifo_node_t or
 * sq_fifo_node_t member); `offset` is offsetof(item type, link member), as in
 * OSAtomicEnqueue. Nothing is allocated; an item may sit in one list at a
 * time per link member.
 *
 * Progress guarantees:
 *   - LIFO push is lock-free (liburcu lfstack, one CAS loop); FIFO enqueue is
 *     wait-free (liburcu wfcqueue: one exchange and one store).
 *   - Any number of threads may pop / dequeue. Consumers are serialised by
 *     an sq_spinlock_t inside the list (liburcu needs consumers to exclude
 *     each other: for the stack, to rule out ABA on the popped node). Producers
 *     never take it.
 *   - A FIFO consumer that meets a producer preempted between its two steps
 *     spins, then yields, until the link appears; it never sleeps the 10 ms
 *     that liburcu's blocking dequeue does.
 *
 * Initialise with sq_lifo_init / sq_fifo_init (or SQ_LIFO_INIT for a LIFO).
 * @{
 */
#ifndef SWIFTQUEUES_LIFO_H
#define SWIFTQUEUES_LIFO_H

#include <swiftqueues/base.h>
#include <swiftqueues/spinlock.h>

SQ_BEGIN_DECLS
SQ_ASSUME_NONNULL_BEGIN

/*! The link an item embeds to be pushed on an sq_lifo_t. */
typedef struct sq_lifo_node_s {
	struct sq_lifo_node_s *SQ_NULLABLE _sq_next;
} sq_lifo_node_t;

/*! An intrusive lock-free LIFO (stack); initialise with SQ_LIFO_INIT or sq_lifo_init. Its fields are private. */
typedef struct sq_lifo_s {
	/* Layout of liburcu's struct __cds_lfs_stack (checked at build time). */
	sq_lifo_node_t *SQ_NULLABLE _sq_head;
	sq_spinlock_t _sq_pop_lock;
} sq_lifo_t;

/*! A static initialiser for an empty sq_lifo_t. */
#define SQ_LIFO_INIT { NULL, SQ_SPINLOCK_INIT }

/*! The link an item embeds to be enqueued on an sq_fifo_t. */
typedef struct sq_fifo_node_s {
	struct sq_fifo_node_s *SQ_NULLABLE _sq_next;
} sq_fifo_node_t;

/*! An intrusive FIFO, wait-free to enqueue; initialise with sq_fifo_init. Its fields are private. */
typedef struct sq_fifo_s {
	/* Layout of liburcu's __cds_wfcq_head and cds_wfcq_tail, 64 bytes
	 * apart so that producers (tail) and consumers (head) do not share a
	 * cache line when the struct is 64-byte aligned. Padding rather than
	 * _Alignas keeps the struct importable into Swift. */
	sq_fifo_node_t _sq_head;
	sq_spinlock_t _sq_dequeue_lock;
	char _sq_pad0[64 - sizeof(sq_fifo_node_t) - sizeof(sq_spinlock_t)];
	sq_fifo_node_t *SQ_NULLABLE _sq_tail;
	char _sq_pad1[64 - sizeof(void *)];
} sq_fifo_t;

/*! Makes `lifo` empty (as SQ_LIFO_INIT does). Not safe while other threads use it.
 *  \param lifo the list. */
SQ_EXPORT SQ_NONNULL_ALL SQ_NOTHROW
void
sq_lifo_init(sq_lifo_t *lifo);

/*! Pushes `item` (lock-free; OSAtomicEnqueue). The push is a full barrier:
 *  a consumer that pops the item sees what the producer wrote to it before.
 *  \param lifo the list.
 *  \param item the item, not in this list already.
 *  \param offset offsetof(item type, its sq_lifo_node_t member).
 *  \return true if the LIFO was empty before. */
SQ_EXPORT SQ_NONNULL_ALL SQ_NOTHROW
bool
sq_lifo_push(sq_lifo_t *lifo, void *item, size_t offset);

/*! Pops the most recently pushed item (OSAtomicDequeue). Consumers
 *  exclude each other on the list's spin lock; producers never take it.
 *  \param lifo the list.
 *  \param offset as given to sq_lifo_push.
 *  \return the item, or NULL when empty. */
SQ_EXPORT SQ_NONNULL_ALL SQ_NOTHROW
void *SQ_NULLABLE
sq_lifo_pop(sq_lifo_t *lifo, size_t offset);

/*!
 * Takes every item at once and returns them as a NULL-terminated chain of
 * links, newest first (follow _sq_next; the item is at link - offset).
 * \param lifo the list.
 * \return the newest link, or NULL when empty.
 */
SQ_EXPORT SQ_NONNULL_ALL SQ_NOTHROW
sq_lifo_node_t *SQ_NULLABLE
sq_lifo_pop_all(sq_lifo_t *lifo);

/*! Whether the LIFO is empty at the moment of the call.
 *  \param lifo the list.
 *  \return true if empty (possibly stale by the time it returns). */
SQ_EXPORT SQ_NONNULL_ALL SQ_NOTHROW
bool
sq_lifo_empty(sq_lifo_t *lifo);

/*! Makes `fifo` empty. Not safe while other threads use it.
 *  \param fifo the list. */
SQ_EXPORT SQ_NONNULL_ALL SQ_NOTHROW
void
sq_fifo_init(sq_fifo_t *fifo);

/*! Appends `item` (wait-free; OSAtomicFifoEnqueue). The enqueue is a
 *  full barrier: the consumer that dequeues the item sees what the producer
 *  wrote to it before.
 *  \param fifo the list.
 *  \param item the item, not in this list already.
 *  \param offset offsetof(item type, its sq_fifo_node_t member).
 *  \return true if the FIFO was empty before. */
SQ_EXPORT SQ_NONNULL_ALL SQ_NOTHROW
bool
sq_fifo_enqueue(sq_fifo_t *fifo, void *item, size_t offset);

/*! Removes the oldest item (OSAtomicFifoDequeue). Consumers exclude each
 *  other on the list's spin lock; producers never take it.
 *  \param fifo the list.
 *  \param offset as given to sq_fifo_enqueue.
 *  \return the item, or NULL when empty. */
SQ_EXPORT SQ_NONNULL_ALL SQ_NOTHROW
void *SQ_NULLABLE
sq_fifo_dequeue(sq_fifo_t *fifo, size_t offset);

/*! Whether the FIFO is empty at the moment of the call.
 *  \param fifo the list.
 *  \return true if empty (possibly stale by the time it returns). */
SQ_EXPORT SQ_NONNULL_ALL SQ_NOTHROW
bool
sq_fifo_empty(sq_fifo_t *fifo);

SQ_ASSUME_NONNULL_END
SQ_END_DECLS

/*! @} */

#endif /* SWIFTQUEUES_LIFO_H */
