/*
 * sq_data_create_with_transform: the RFC 4648 vectors in base32,
 * base32hex and base64 both ways, round trips through every pair of a
 * family, the byte-order marks of UTF-16, UTF_ANY detection, input split
 * over several regions, whitespace in encoded text, and NULL for formats
 * that do not convert and for malformed input.
 */
#include "sqtest.h"

#include <string.h>

static sq_data_t
bytes(const void *p, size_t n)
{
	return sq_data_create_f(p, n, NULL, SQ_DATA_DESTRUCTOR_DEFAULT);
}

static sq_data_t
text(const char *s)
{
	return bytes(s, strlen(s));
}

/* Whether `d` holds exactly the `n` bytes at `p` (and releases it). */
static bool
holds(sq_data_t d, const void *p, size_t n)
{
	if (d == NULL)
		return false;
	const void *q = NULL;
	size_t m = 0;
	sq_data_t map = sq_data_create_map(d, &q, &m);
	bool same = m == n && (n == 0 || memcmp(p, q, n) == 0);
	if (!same)
		fprintf(stderr, "  got %zu bytes: %.*s\n", m, (int)m,
				(const char *)q);
	sq_release(map);
	sq_release(d);
	return same;
}

static bool
transforms(const char *in, sq_data_format_type_t from,
		sq_data_format_type_t to, const char *expected)
{
	sq_data_t d = text(in);
	sq_data_t r = sq_data_create_with_transform(d, from, to);
	sq_release(d);
	return holds(r, expected, strlen(expected));
}

static bool
refuses(const void *p, size_t n, sq_data_format_type_t from,
		sq_data_format_type_t to)
{
	sq_data_t d = bytes(p, n);
	sq_data_t r = sq_data_create_with_transform(d, from, to);
	sq_release(d);
	if (r != NULL)
		sq_release(r);
	return r == NULL;
}

int
main(void)
{
	/* RFC 4648, section 10. */
	static const char *plain[] = { "f", "fo", "foo", "foob", "fooba",
			"foobar" };
	static const char *b64[] = { "Zg==", "Zm8=", "Zm9v", "Zm9vYg==",
			"Zm9vYmE=", "Zm9vYmFy" };
	static const char *b32[] = { "MY======", "MZXQ====", "MZXW6===",
			"MZXW6YQ=", "MZXW6YTB", "MZXW6YTBOI======" };
	static const char *b32hex[] = { "CO======", "CPNG====", "CPNMU===",
			"CPNMUOG=", "CPNMUOJ1", "CPNMUOJ1E8======" };
	for (int i = 0; i < 6; i++) {
		CHECK(transforms(plain[i], SQ_DATA_FORMAT_TYPE_NONE,
				SQ_DATA_FORMAT_TYPE_BASE64, b64[i]));
		CHECK(transforms(b64[i], SQ_DATA_FORMAT_TYPE_BASE64,
				SQ_DATA_FORMAT_TYPE_NONE, plain[i]));
		CHECK(transforms(plain[i], SQ_DATA_FORMAT_TYPE_NONE,
				SQ_DATA_FORMAT_TYPE_BASE32, b32[i]));
		CHECK(transforms(b32[i], SQ_DATA_FORMAT_TYPE_BASE32,
				SQ_DATA_FORMAT_TYPE_NONE, plain[i]));
		CHECK(transforms(plain[i], SQ_DATA_FORMAT_TYPE_NONE,
				SQ_DATA_FORMAT_TYPE_BASE32HEX, b32hex[i]));
		CHECK(transforms(b32hex[i], SQ_DATA_FORMAT_TYPE_BASE32HEX,
				SQ_DATA_FORMAT_TYPE_NONE, plain[i]));
		/* Text to text goes through the raw bytes. */
		CHECK(transforms(b64[i], SQ_DATA_FORMAT_TYPE_BASE64,
				SQ_DATA_FORMAT_TYPE_BASE32, b32[i]));
		CHECK(transforms(b32hex[i], SQ_DATA_FORMAT_TYPE_BASE32HEX,
				SQ_DATA_FORMAT_TYPE_BASE64, b64[i]));
	}
	/* Whitespace is skipped; other characters are not text. */
	CHECK(transforms("Zm9v\nYmFy\t ", SQ_DATA_FORMAT_TYPE_BASE64,
			SQ_DATA_FORMAT_TYPE_NONE, "foobar"));
	CHECK(refuses("Zm9v*mFy", 8, SQ_DATA_FORMAT_TYPE_BASE64,
			SQ_DATA_FORMAT_TYPE_NONE));
	CHECK(refuses("MZXW6YQ1", 8, SQ_DATA_FORMAT_TYPE_BASE32,
			SQ_DATA_FORMAT_TYPE_NONE));
	CHECK(refuses("Zg==Zg==", 8, SQ_DATA_FORMAT_TYPE_BASE64,
			SQ_DATA_FORMAT_TYPE_NONE));

	/* Every byte value through base64 and back, from three regions. */
	uint8_t all[256];
	for (int i = 0; i < 256; i++)
		all[i] = (uint8_t)i;
	sq_data_t a = bytes(all, 100), b = bytes(all + 100, 77),
			c = bytes(all + 177, 79);
	sq_data_t ab = sq_data_create_concat(a, b);
	sq_data_t abc = sq_data_create_concat(ab, c);
	sq_data_t enc = sq_data_create_with_transform(abc,
			SQ_DATA_FORMAT_TYPE_NONE, SQ_DATA_FORMAT_TYPE_BASE64);
	CHECK(enc != NULL && sq_data_get_size(enc) == 344);
	sq_data_t dec = sq_data_create_with_transform(enc,
			SQ_DATA_FORMAT_TYPE_BASE64, SQ_DATA_FORMAT_TYPE_NONE);
	CHECK(holds(dec, all, 256));
	sq_release(enc);
	sq_release(a);
	sq_release(b);
	sq_release(c);
	sq_release(ab);
	sq_release(abc);

	/* UTF-8 -> UTF-16 with a byte-order mark, and back. "aé€𝄞". */
	static const char utf8[] = "a\xc3\xa9\xe2\x82\xac\xf0\x9d\x84\x9e";
	static const uint8_t le[] = { 0xff, 0xfe, 'a', 0, 0xe9, 0, 0xac, 0x20,
			0x34, 0xd8, 0x1e, 0xdd };
	static const uint8_t be[] = { 0xfe, 0xff, 0, 'a', 0, 0xe9, 0x20, 0xac,
			0xd8, 0x34, 0xdd, 0x1e };
	sq_data_t u = text(utf8);
	CHECK(holds(sq_data_create_with_transform(u, SQ_DATA_FORMAT_TYPE_UTF8,
			SQ_DATA_FORMAT_TYPE_UTF16LE), le, sizeof(le)));
	CHECK(holds(sq_data_create_with_transform(u, SQ_DATA_FORMAT_TYPE_UTF8,
			SQ_DATA_FORMAT_TYPE_UTF16BE), be, sizeof(be)));
	CHECK(holds(sq_data_create_with_transform(u, SQ_DATA_FORMAT_TYPE_UTF_ANY,
			SQ_DATA_FORMAT_TYPE_UTF8), utf8, strlen(utf8)));
	sq_release(u);
	sq_data_t l = bytes(le, sizeof(le)), g = bytes(be, sizeof(be));
	CHECK(holds(sq_data_create_with_transform(l, SQ_DATA_FORMAT_TYPE_UTF16LE,
			SQ_DATA_FORMAT_TYPE_UTF8), utf8, strlen(utf8)));
	CHECK(holds(sq_data_create_with_transform(g, SQ_DATA_FORMAT_TYPE_UTF16BE,
			SQ_DATA_FORMAT_TYPE_UTF8), utf8, strlen(utf8)));
	CHECK(holds(sq_data_create_with_transform(l, SQ_DATA_FORMAT_TYPE_UTF_ANY,
			SQ_DATA_FORMAT_TYPE_UTF16BE), be, sizeof(be)));
	CHECK(holds(sq_data_create_with_transform(g, SQ_DATA_FORMAT_TYPE_UTF_ANY,
			SQ_DATA_FORMAT_TYPE_UTF16LE), le, sizeof(le)));
	/* A mark of the other order is refused. */
	CHECK(sq_data_create_with_transform(g, SQ_DATA_FORMAT_TYPE_UTF16LE,
			SQ_DATA_FORMAT_TYPE_UTF8) == NULL);
	sq_release(l);
	sq_release(g);

	/* Malformed Unicode. */
	CHECK(refuses("\xc3", 1, SQ_DATA_FORMAT_TYPE_UTF8,
			SQ_DATA_FORMAT_TYPE_UTF16LE));           /* truncated */
	CHECK(refuses("\xc0\xaf", 2, SQ_DATA_FORMAT_TYPE_UTF8,
			SQ_DATA_FORMAT_TYPE_UTF16LE));           /* overlong */
	CHECK(refuses("\xed\xa0\x80", 3, SQ_DATA_FORMAT_TYPE_UTF8,
			SQ_DATA_FORMAT_TYPE_UTF16LE));           /* surrogate */
	CHECK(refuses("\xff", 1, SQ_DATA_FORMAT_TYPE_UTF8,
			SQ_DATA_FORMAT_TYPE_UTF16BE));
	static const uint8_t lone[] = { 0x00, 0xdc };
	CHECK(refuses(lone, 2, SQ_DATA_FORMAT_TYPE_UTF16LE,
			SQ_DATA_FORMAT_TYPE_UTF8));
	static const uint8_t unpaired[] = { 0x34, 0xd8, 'a', 0 };
	CHECK(refuses(unpaired, 4, SQ_DATA_FORMAT_TYPE_UTF16LE,
			SQ_DATA_FORMAT_TYPE_UTF8));
	CHECK(refuses("abc", 3, SQ_DATA_FORMAT_TYPE_UTF16LE,
			SQ_DATA_FORMAT_TYPE_UTF8));              /* odd size */
	CHECK(refuses("a", 1, SQ_DATA_FORMAT_TYPE_UTF_ANY,
			SQ_DATA_FORMAT_TYPE_UTF8));              /* too short */

	/* Formats that do not convert. */
	CHECK(refuses("abc", 3, SQ_DATA_FORMAT_TYPE_NONE,
			SQ_DATA_FORMAT_TYPE_UTF8));
	CHECK(refuses("abc", 3, SQ_DATA_FORMAT_TYPE_UTF8,
			SQ_DATA_FORMAT_TYPE_BASE64));
	CHECK(refuses("abc", 3, SQ_DATA_FORMAT_TYPE_UTF8,
			SQ_DATA_FORMAT_TYPE_UTF_ANY));

	/* Empty data is its own transform; same-format transforms copy. */
	sq_data_t e = sq_data_create_with_transform(sq_data_empty,
			SQ_DATA_FORMAT_TYPE_NONE, SQ_DATA_FORMAT_TYPE_BASE64);
	CHECK(e == sq_data_empty);
	CHECK(transforms("plain", SQ_DATA_FORMAT_TYPE_UTF8,
			SQ_DATA_FORMAT_TYPE_UTF8, "plain"));
	CHECK(transforms("Zm9v YmFy", SQ_DATA_FORMAT_TYPE_BASE64,
			SQ_DATA_FORMAT_TYPE_BASE64, "Zm9vYmFy"));
	return sqt_finish("data_transform");
}
