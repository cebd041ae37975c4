/*
 * SwiftQueues — data transforms (libdispatch's
 * dispatch_data_create_with_transform): between raw bytes and base32,
 * base32hex or base64 text, and between UTF-8, UTF-16LE and UTF-16BE.
 *
 * A transform decodes the input to raw bytes (UTF-16 to UTF-8), then
 * encodes that in the output format. The two families do not mix: text
 * formats convert among themselves and to and from NONE, Unicode formats
 * among themselves. UTF_ANY, as the input only, reads a byte-order mark:
 * FF FE or FE FF is UTF-16 of that order, anything else UTF-8. Encoding to
 * UTF-16 writes a byte-order mark; decoding UTF-16 skips one in the
 * format's order and refuses one in the other order. Decoding base32 /
 * base64 skips spaces, tabs and newlines. Anything malformed (a character
 * outside the alphabet, a truncated or overlong UTF-8 sequence, a lone
 * surrogate, an odd number of UTF-16 bytes) gives NULL.
 *
 * The input is mapped to one contiguous buffer (sq_data_create_map) and
 * each step writes a new malloc'ed one: transforms are for payloads that
 * fit in memory.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

enum {
	FMT_NONE = 0x1,
	FMT_UTF8 = 0x2,
	FMT_UTF16LE = 0x4,
	FMT_UTF16BE = 0x8,
	FMT_UTF_ANY = 0x10,
	FMT_BASE32 = 0x20,
	FMT_BASE32HEX = 0x40,
	FMT_BASE64 = 0x80,
};

#define FMT_TEXT (FMT_NONE | FMT_BASE32 | FMT_BASE32HEX | FMT_BASE64)
#define FMT_UNICODE (FMT_UTF8 | FMT_UTF16LE | FMT_UTF16BE)

struct sq_data_format_type_s {
	unsigned type;
	unsigned peers; /* the formats it converts to and from */
};

const struct sq_data_format_type_s _sq_data_format_type_none =
		{ FMT_NONE, FMT_TEXT };
const struct sq_data_format_type_s _sq_data_format_type_base32 =
		{ FMT_BASE32, FMT_TEXT };
const struct sq_data_format_type_s _sq_data_format_type_base32hex =
		{ FMT_BASE32HEX, FMT_TEXT };
const struct sq_data_format_type_s _sq_data_format_type_base64 =
		{ FMT_BASE64, FMT_TEXT };
const struct sq_data_format_type_s _sq_data_format_type_utf8 =
		{ FMT_UTF8, FMT_UNICODE };
const struct sq_data_format_type_s _sq_data_format_type_utf16le =
		{ FMT_UTF16LE, FMT_UNICODE };
const struct sq_data_format_type_s _sq_data_format_type_utf16be =
		{ FMT_UTF16BE, FMT_UNICODE };
const struct sq_data_format_type_s _sq_data_format_type_utf_any =
		{ FMT_UTF_ANY, 0 };

/* A growing output buffer; `failed` once an allocation failed. */
struct out {
	uint8_t *buf;
	size_t len, cap;
	bool failed;
};

static bool
out_reserve(struct out *o, size_t more)
{
	if (o->failed)
		return false;
	if (o->len + more <= o->cap)
		return true;
	size_t cap = o->cap ? o->cap : 64;
	while (cap < o->len + more) {
		if (cap > SIZE_MAX / 2)
			return !(o->failed = true);
		cap *= 2;
	}
	uint8_t *buf = realloc(o->buf, cap);
	if (buf == NULL)
		return !(o->failed = true);
	o->buf = buf;
	o->cap = cap;
	return true;
}

static void
out_byte(struct out *o, uint8_t b)
{
	if (out_reserve(o, 1))
		o->buf[o->len++] = b;
}

/* The buffer as data (which frees it), or NULL when something failed. */
static sq_data_t
out_finish(struct out *o, bool ok)
{
	if (!ok || o->failed) {
		free(o->buf);
		return NULL;
	}
	if (o->len == 0) {
		free(o->buf);
		return sq_data_empty;
	}
	return sq_data_create_f(o->buf, o->len, NULL,
			(sq_function_t)_sq_data_destructor_free);
}

/* ---- base32, base32hex, base64 ---- */

static const char base32_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
static const char base32hex_alphabet[] = "0123456789ABCDEFGHIJKLMNOPQRSTUV";
static const char base64_alphabet[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static const char *
alphabet_of(unsigned type, unsigned *bits)
{
	*bits = type == FMT_BASE64 ? 6 : 5;
	return type == FMT_BASE32 ? base32_alphabet :
			type == FMT_BASE32HEX ? base32hex_alphabet :
			base64_alphabet;
}

/* Raw bytes as text, padded with '=' to whole groups (4 characters for
 * base64, 8 for base32). */
static sq_data_t
encode_base(const uint8_t *in, size_t n, unsigned type)
{
	unsigned bits;
	const char *alphabet = alphabet_of(type, &bits);
	size_t group = bits == 6 ? 4 : 8;
	struct out o = { 0 };
	uint32_t acc = 0;
	unsigned have = 0;
	size_t chars = 0;
	for (size_t i = 0; i < n; i++) {
		acc = (acc << 8) | in[i];
		have += 8;
		while (have >= bits) {
			have -= bits;
			out_byte(&o, (uint8_t)alphabet[(acc >> have) &
					((1u << bits) - 1)]);
			chars++;
		}
	}
	if (have > 0) {
		out_byte(&o, (uint8_t)alphabet[(acc << (bits - have)) &
				((1u << bits) - 1)]);
		chars++;
	}
	while (chars % group != 0) {
		out_byte(&o, '=');
		chars++;
	}
	return out_finish(&o, true);
}

static int
alphabet_value(const char *alphabet, unsigned bits, uint8_t c)
{
	for (unsigned v = 0; v < (1u << bits); v++)
		if ((uint8_t)alphabet[v] == c)
			return (int)v;
	return -1;
}

/* Text back to raw bytes: whitespace skipped, padding only at the end. */
static sq_data_t
decode_base(const uint8_t *in, size_t n, unsigned type)
{
	unsigned bits;
	const char *alphabet = alphabet_of(type, &bits);
	struct out o = { 0 };
	uint32_t acc = 0;
	unsigned have = 0;
	bool padding = false;
	for (size_t i = 0; i < n; i++) {
		uint8_t c = in[i];
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
			continue;
		if (c == '=') {
			padding = true;
			continue;
		}
		int v = alphabet_value(alphabet, bits, c);
		if (v < 0 || padding)
			return out_finish(&o, false);
		acc = (acc << bits) | (uint32_t)v;
		have += bits;
		if (have >= 8) {
			have -= 8;
			out_byte(&o, (uint8_t)(acc >> have));
		}
	}
	return out_finish(&o, true);
}

/* ---- UTF-8 and UTF-16 ---- */

static void
put_utf16(struct out *o, uint16_t unit, bool big)
{
	out_byte(o, (uint8_t)(big ? unit >> 8 : unit));
	out_byte(o, (uint8_t)(big ? unit : unit >> 8));
}

/* UTF-8 as UTF-16 with a byte-order mark. */
static sq_data_t
utf8_to_utf16(const uint8_t *in, size_t n, bool big)
{
	struct out o = { 0 };
	put_utf16(&o, 0xfeff, big);
	for (size_t i = 0; i < n;) {
		uint8_t b = in[i];
		unsigned len = b < 0x80 ? 1 : (b & 0xe0) == 0xc0 ? 2 :
				(b & 0xf0) == 0xe0 ? 3 : (b & 0xf8) == 0xf0 ? 4 : 0;
		if (len == 0 || i + len > n)
			return out_finish(&o, false);
		uint32_t cp = len == 1 ? b : b & (0x7fu >> len);
		for (unsigned k = 1; k < len; k++) {
			if ((in[i + k] & 0xc0) != 0x80)
				return out_finish(&o, false);
			cp = (cp << 6) | (in[i + k] & 0x3fu);
		}
		static const uint32_t least[5] = { 0, 0, 0x80, 0x800, 0x10000 };
		if (cp < least[len] || cp > 0x10ffff ||
				(cp >= 0xd800 && cp <= 0xdfff))
			return out_finish(&o, false);
		if (cp >= 0x10000) {
			cp -= 0x10000;
			put_utf16(&o, (uint16_t)(0xd800 + (cp >> 10)), big);
			put_utf16(&o, (uint16_t)(0xdc00 + (cp & 0x3ff)), big);
		} else {
			put_utf16(&o, (uint16_t)cp, big);
		}
		i += len;
	}
	return out_finish(&o, true);
}

/* UTF-16 of one byte order as UTF-8 (a leading mark of that order
 * skipped, one of the other order refused). */
static sq_data_t
utf16_to_utf8(const uint8_t *in, size_t n, bool big)
{
	struct out o = { 0 };
	if (n % 2 != 0)
		return out_finish(&o, false);
	for (size_t i = 0; i < n; i += 2) {
		uint32_t cp = big ? (uint32_t)(in[i] << 8 | in[i + 1]) :
				(uint32_t)(in[i + 1] << 8 | in[i]);
		if (i == 0 && cp == 0xfeff)
			continue;
		if (i == 0 && cp == 0xfffe)
			return out_finish(&o, false);
		if (cp >= 0xdc00 && cp <= 0xdfff)
			return out_finish(&o, false);
		if (cp >= 0xd800 && cp <= 0xdbff) {
			if (i + 4 > n)
				return out_finish(&o, false);
			uint32_t lo = big ? (uint32_t)(in[i + 2] << 8 | in[i + 3]) :
					(uint32_t)(in[i + 3] << 8 | in[i + 2]);
			if (lo < 0xdc00 || lo > 0xdfff)
				return out_finish(&o, false);
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			i += 2;
		}
		if (cp < 0x80) {
			out_byte(&o, (uint8_t)cp);
		} else if (cp < 0x800) {
			out_byte(&o, (uint8_t)(0xc0 | cp >> 6));
			out_byte(&o, (uint8_t)(0x80 | (cp & 0x3f)));
		} else if (cp < 0x10000) {
			out_byte(&o, (uint8_t)(0xe0 | cp >> 12));
			out_byte(&o, (uint8_t)(0x80 | ((cp >> 6) & 0x3f)));
			out_byte(&o, (uint8_t)(0x80 | (cp & 0x3f)));
		} else {
			out_byte(&o, (uint8_t)(0xf0 | cp >> 18));
			out_byte(&o, (uint8_t)(0x80 | ((cp >> 12) & 0x3f)));
			out_byte(&o, (uint8_t)(0x80 | ((cp >> 6) & 0x3f)));
			out_byte(&o, (uint8_t)(0x80 | (cp & 0x3f)));
		}
	}
	return out_finish(&o, true);
}

/* ---- The transform ---- */

/* `data` (contiguous at `p`, `n` bytes) decoded to the family's plain
 * form: raw bytes for the text formats, UTF-8 for the Unicode ones. */
static sq_data_t
decode(sq_data_t data, const uint8_t *p, size_t n, unsigned type)
{
	switch (type) {
	case FMT_BASE32:
	case FMT_BASE32HEX:
	case FMT_BASE64:
		return decode_base(p, n, type);
	case FMT_UTF16LE:
		return utf16_to_utf8(p, n, false);
	case FMT_UTF16BE:
		return utf16_to_utf8(p, n, true);
	default: /* NONE, UTF-8: already plain */
		sq_retain(data);
		return data;
	}
}

static sq_data_t
encode(sq_data_t plain, unsigned type)
{
	if (type == FMT_NONE || type == FMT_UTF8) {
		sq_retain(plain);
		return plain;
	}
	const void *p = NULL;
	size_t n = 0;
	sq_data_t map = sq_data_create_map(plain, &p, &n);
	sq_data_t result = type == FMT_UTF16LE ? utf8_to_utf16(p, n, false) :
			type == FMT_UTF16BE ? utf8_to_utf16(p, n, true) :
			encode_base(p, n, type);
	sq_release(map);
	return result;
}

sq_data_t
sq_data_create_with_transform(sq_data_t data, sq_data_format_type_t input,
		sq_data_format_type_t output)
{
	_sq_object_validate("sq_data_create_with_transform", data);
	if (input == NULL || output == NULL)
		_sq_client_crash("sq_data_create_with_transform",
				"format is NULL");
	const void *p = NULL;
	size_t n = 0;
	sq_data_t map = sq_data_create_map(data, &p, &n);
	unsigned in_type = input->type;
	if (in_type == FMT_UTF_ANY) {
		/* libdispatch's detection: two bytes or nothing. */
		if (n < 2) {
			sq_release(map);
			return NULL;
		}
		const uint8_t *b = p;
		in_type = b[0] == 0xff && b[1] == 0xfe ? FMT_UTF16LE :
				b[0] == 0xfe && b[1] == 0xff ? FMT_UTF16BE :
				FMT_UTF8;
	}
	unsigned in_peers = in_type & FMT_TEXT ? FMT_TEXT : FMT_UNICODE;
	if (!(output->peers & in_type) || !(in_peers & output->type)) {
		sq_release(map);
		return NULL;
	}
	if (n == 0) {
		sq_release(map);
		sq_retain(data);
		return data;
	}
	sq_data_t plain = decode(data, p, n, in_type);
	sq_release(map);
	if (plain == NULL)
		return NULL;
	sq_data_t result = encode(plain, output->type);
	sq_release(plain);
	return result;
}
