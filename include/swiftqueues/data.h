/*!
 * \defgroup swiftqueues_data Data objects
 * \ingroup swiftqueues
 *
 * Data objects (libdispatch's data.h, renamed).
 *
 * An sq_data_t is an immutable, reference-counted sequence of bytes backed
 * by one or more memory regions. Concatenating, taking a subrange or looking
 * up a region never copies a byte: the new object shares the regions of the
 * old ones. A region's buffer is given back (its destructor runs) exactly
 * once, when the last data object that shares it is released.
 *
 * Data objects are immutable: any thread may read, map or combine them.
 *
 * \par Misuse
 * Running out of memory, or a concatenation whose size would overflow,
 * stops the process ("SwiftQueues: sq_data_create_concat: size
 * overflows").
 * @{
 */
#ifndef SWIFTQUEUES_DATA_H
#define SWIFTQUEUES_DATA_H

#include <swiftqueues/base.h>
#include <swiftqueues/object.h>
#include <swiftqueues/queue.h>

SQ_BEGIN_DECLS
SQ_ASSUME_NONNULL_BEGIN

/*! An immutable, reference-counted sequence of bytes (an object: sq_retain, sq_release). */
typedef struct sq_data_s *sq_data_t;

SQ_EXPORT struct sq_data_s _sq_data_empty;
/*! The empty data object: a global; retain and release are ignored. */
#define sq_data_empty (&_sq_data_empty)

/* Markers recognised by sq_data_create and sq_data_create_f; never
 * called. The data keeps what it must give back and does it itself. */
SQ_EXPORT void _sq_data_destructor_free(void *SQ_NULLABLE buffer);
SQ_EXPORT void _sq_data_destructor_munmap(void *SQ_NULLABLE buffer);

/*
 * The destructor markers (libdispatch's), for sq_data_create (a block) and
 * sq_data_create_f (a function) alike: in C they are untyped pointers,
 * which either parameter accepts. (In C++, which does not convert them,
 * they are block-typed with blocks and function-typed without, as in
 * libdispatch.)
 */
/*! Copy the buffer now; the caller keeps ownership of its own. */
#define SQ_DATA_DESTRUCTOR_DEFAULT NULL
#if !defined(__cplusplus)
/*! The buffer came from malloc: free() it when the data goes. */
#define SQ_DATA_DESTRUCTOR_FREE ((void *)_sq_data_destructor_free)
/*! The buffer came from mmap: munmap() it when the data goes. */
#define SQ_DATA_DESTRUCTOR_MUNMAP ((void *)_sq_data_destructor_munmap)
#elif defined(__BLOCKS__)
#define SQ_DATA_DESTRUCTOR_FREE \
	((sq_block_t)(void *)_sq_data_destructor_free)
#define SQ_DATA_DESTRUCTOR_MUNMAP \
	((sq_block_t)(void *)_sq_data_destructor_munmap)
#else
#define SQ_DATA_DESTRUCTOR_FREE (_sq_data_destructor_free)
#define SQ_DATA_DESTRUCTOR_MUNMAP (_sq_data_destructor_munmap)
#endif

/*!
 * Creates a data object over `size` bytes at `buffer` (libdispatch's
 * dispatch_data_create_f). `destructor` says who owns the buffer:
 * SQ_DATA_DESTRUCTOR_DEFAULT (copied now), SQ_DATA_DESTRUCTOR_FREE,
 * SQ_DATA_DESTRUCTOR_MUNMAP, or a function called as destructor(buffer) on
 * `queue` (NULL: the default global queue) once the last data object
 * sharing the buffer is gone. A size of 0 returns sq_data_empty (a custom
 * destructor still runs, at once, on the queue).
 * \param buffer the bytes; may be NULL when `size` is 0.
 * \param size how many bytes.
 * \param queue where a custom destructor runs (NULL: the default global
 *        queue).
 * \param destructor a marker or a function called with `buffer`.
 * \return a new data object; the caller owns one reference.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_data_t
sq_data_create_f(const void *SQ_NULLABLE buffer, size_t size,
		sq_queue_t SQ_NULLABLE queue,
		sq_function_t SQ_NULLABLE destructor);

/*!
 * sq_data_create_f with a destructor context (a SwiftQueues addition): the
 * buffer is not copied, and destructor(context) runs on `queue` (NULL: the
 * default global queue) once the last data object sharing the buffer is
 * gone. SQ_DATA_DESTRUCTOR_FREE frees `context`; SQ_DATA_DESTRUCTOR_MUNMAP
 * stops the process ("SwiftQueues: sq_data_create_with_context_f:
 * SQ_DATA_DESTRUCTOR_MUNMAP needs the buffer ...").
 * \param buffer the bytes; may be NULL when `size` is 0.
 * \param size how many bytes.
 * \param queue where the destructor runs (NULL: the default global queue).
 * \param context passed to `destructor`.
 * \param destructor called once with `context`.
 * \return a new data object; the caller owns one reference.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_data_t
sq_data_create_with_context_f(const void *SQ_NULLABLE buffer, size_t size,
		sq_queue_t SQ_NULLABLE queue, void *SQ_NULLABLE context,
		sq_function_t destructor);

/*! The number of bytes (dispatch_data_get_size).
 *  \param data the data object.
 *  \return its size in bytes. */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
size_t
sq_data_get_size(sq_data_t data);

/*!
 * One contiguous view of the bytes: returns a data object whose single
 * region holds them and stores its address and size in *buffer_ptr and
 * *size_ptr (either may be NULL). Copies only when `data` has more than one
 * region; otherwise it shares the region. The view is valid while the
 * returned object (owned by the caller) lives (dispatch_data_create_map).
 * \param data the data object.
 * \param buffer_ptr receives the address of the bytes; may be NULL.
 * \param size_ptr receives their number; may be NULL.
 * \return a data object with one region; the caller owns one reference.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_data_t
sq_data_create_map(sq_data_t data,
		const void *SQ_NULLABLE *SQ_NULLABLE buffer_ptr,
		size_t *SQ_NULLABLE size_ptr);

/*! The bytes of `data1` followed by those of `data2`, sharing both
 *  (dispatch_data_create_concat). A size that would overflow stops the
 *  process ("SwiftQueues: sq_data_create_concat: size overflows").
 *  \param data1 the first part.
 *  \param data2 the second part.
 *  \return a new data object; the caller owns one reference. */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_data_t
sq_data_create_concat(sq_data_t data1, sq_data_t data2);

/*!
 * Bytes [offset, offset + length) of `data`, sharing its regions. The range
 * is clipped to the data's size (length SIZE_MAX: to the end)
 * (dispatch_data_create_subrange).
 * \param data the data object.
 * \param offset the first byte.
 * \param length how many bytes.
 * \return a new data object; the caller owns one reference.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_data_t
sq_data_create_subrange(sq_data_t data, size_t offset, size_t length);

/*!
 * Called for each region in order: `region` is a data object for just that
 * region (valid during the call; retain it to keep it), `offset` its
 * position in the whole, `buffer` and `size` its bytes. Return false to stop.
 */
typedef bool (*sq_data_applier_function_t)(void *SQ_NULLABLE context,
		sq_data_t region, size_t offset, const void *buffer,
		size_t size);

/*!
 * Walks the regions of `data` in order. Returns false if the applier
 * stopped the walk, true otherwise (also for empty data, which has none)
 * (dispatch_data_apply_f). The applier runs on the calling thread.
 * \param data the data object.
 * \param context passed to `applier`.
 * \param applier called for each region.
 * \return false if the applier stopped the walk, true otherwise.
 */
SQ_EXPORT SQ_NOTHROW
bool
sq_data_apply_f(sq_data_t data, void *SQ_NULLABLE context,
		sq_data_applier_function_t applier);

/*!
 * The region that holds byte `location`, as a data object the caller owns;
 * *offset_ptr receives the region's offset in `data`. A location past the
 * end gives sq_data_empty and *offset_ptr = size (dispatch_data_copy_region).
 * \param data the data object.
 * \param location a byte offset in `data`.
 * \param offset_ptr receives the region's offset.
 * \return the region as a data object; the caller owns one reference.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_data_t
sq_data_copy_region(sq_data_t data, size_t location, size_t *offset_ptr);

#ifdef __BLOCKS__
/*! The block form of sq_data_applier_function_t: called with each region, its offset in the whole, its bytes and size; returns false to stop. */
typedef bool (^sq_data_applier_t)(sq_data_t region, size_t offset,
		const void *buffer, size_t size);

SQ_INLINE bool
_sq_data_call_applier_block(void *SQ_NULLABLE block, sq_data_t region,
		size_t offset, const void *buffer, size_t size)
{
	return ((sq_data_applier_t)block)(region, offset, buffer, size);
}

/*! sq_data_apply_f with a block (called synchronously, not copied;
 *  dispatch_data_apply).
 *  \param data the data object.
 *  \param applier called for each region.
 *  \return false if the applier stopped the walk, true otherwise. */
SQ_INLINE bool
sq_data_apply(sq_data_t data, sq_data_applier_t SQ_NOESCAPE applier)
{
	return sq_data_apply_f(data, (void *)applier,
			_sq_data_call_applier_block);
}

SQ_INLINE void
_sq_data_call_destructor_block(void *SQ_NULLABLE block)
{
	((sq_block_t)block)();
	_Block_release(block);
}

/*!
 * Creates a data object over `size` bytes at `buffer` (libdispatch's
 * dispatch_data_create): `destructor` is SQ_DATA_DESTRUCTOR_DEFAULT (the
 * buffer is copied now), SQ_DATA_DESTRUCTOR_FREE, SQ_DATA_DESTRUCTOR_MUNMAP,
 * or a block (copied) that runs once on `queue` (NULL: the default global
 * queue) when the last data object sharing the buffer is gone.
 * \param buffer the bytes; may be NULL when `size` is 0.
 * \param size how many bytes.
 * \param queue where a destructor block runs (NULL: the default global
 *        queue).
 * \param destructor a marker or a block.
 * \return a new data object; the caller owns one reference.
 */
SQ_INLINE sq_data_t
sq_data_create(const void *SQ_NULLABLE buffer, size_t size,
		sq_queue_t SQ_NULLABLE queue, sq_block_t SQ_NULLABLE destructor)
{
	if (destructor == SQ_DATA_DESTRUCTOR_DEFAULT ||
			destructor == SQ_DATA_DESTRUCTOR_FREE ||
			destructor == SQ_DATA_DESTRUCTOR_MUNMAP)
		return sq_data_create_f(buffer, size, queue,
				(sq_function_t)(void *)destructor);
	return sq_data_create_with_context_f(buffer, size, queue,
			_Block_copy((const void *)destructor),
			_sq_data_call_destructor_block);
}
#endif

/* ---- Transforms ---- */

/*!
 * A data format for sq_data_create_with_transform (libdispatch's
 * dispatch_data_format_type_t).
 */
typedef const struct sq_data_format_type_s *sq_data_format_type_t;

SQ_EXPORT const struct sq_data_format_type_s _sq_data_format_type_none;
SQ_EXPORT const struct sq_data_format_type_s _sq_data_format_type_base32;
SQ_EXPORT const struct sq_data_format_type_s _sq_data_format_type_base32hex;
SQ_EXPORT const struct sq_data_format_type_s _sq_data_format_type_base64;
SQ_EXPORT const struct sq_data_format_type_s _sq_data_format_type_utf8;
SQ_EXPORT const struct sq_data_format_type_s _sq_data_format_type_utf16le;
SQ_EXPORT const struct sq_data_format_type_s _sq_data_format_type_utf16be;
SQ_EXPORT const struct sq_data_format_type_s _sq_data_format_type_utf_any;

/*! Raw bytes. */
#define SQ_DATA_FORMAT_TYPE_NONE (&_sq_data_format_type_none)
/*! RFC 4648 base32, base32hex and base64 text, padded with '='. */
#define SQ_DATA_FORMAT_TYPE_BASE32 (&_sq_data_format_type_base32)
/*! RFC 4648 base32hex (extended hex alphabet), padded with '='. */
#define SQ_DATA_FORMAT_TYPE_BASE32HEX (&_sq_data_format_type_base32hex)
/*! RFC 4648 base64, padded with '='. */
#define SQ_DATA_FORMAT_TYPE_BASE64 (&_sq_data_format_type_base64)
/*! Unicode text: UTF-8, UTF-16 of either byte order (written with a
 * byte-order mark), or, as an input only, whichever a byte-order mark
 * says (UTF-8 without one). */
#define SQ_DATA_FORMAT_TYPE_UTF8 (&_sq_data_format_type_utf8)
/*! UTF-16, little-endian (written with a byte-order mark). */
#define SQ_DATA_FORMAT_TYPE_UTF16LE (&_sq_data_format_type_utf16le)
/*! UTF-16, big-endian (written with a byte-order mark). */
#define SQ_DATA_FORMAT_TYPE_UTF16BE (&_sq_data_format_type_utf16be)
/*! Input only: UTF-8 or UTF-16 as a byte-order mark says (UTF-8 without one). */
#define SQ_DATA_FORMAT_TYPE_UTF_ANY (&_sq_data_format_type_utf_any)

/*!
 * `data` converted from `input` to `output` format, as new data the
 * caller owns; `data` itself (retained) when it is empty. NONE, BASE32,
 * BASE32HEX and BASE64 convert among themselves, UTF8, UTF16LE and
 * UTF16BE among themselves (UTF_ANY as input). Returns NULL for formats
 * that do not convert, and for input that is not in its format:
 * characters outside the alphabet (spaces, tabs and newlines are
 * skipped), malformed UTF-8 or UTF-16, a byte-order mark of the other
 * order, UTF_ANY input shorter than two bytes
 * (dispatch_data_create_with_transform). A NULL format stops the process
 * ("SwiftQueues: sq_data_create_with_transform: format is NULL").
 * \param data the bytes to convert.
 * \param input the format `data` is in.
 * \param output the format wanted.
 * \return the converted data (the caller owns one reference), or NULL.
 */
SQ_EXPORT SQ_WARN_RESULT SQ_NOTHROW
sq_data_t SQ_NULLABLE
sq_data_create_with_transform(sq_data_t data, sq_data_format_type_t input,
		sq_data_format_type_t output);

SQ_ASSUME_NONNULL_END
SQ_END_DECLS

/*! @} */

#endif /* SWIFTQUEUES_DATA_H */
