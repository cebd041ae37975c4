/*
 * A small JSON reader for the tests that check trace files: parses a whole
 * document into a tree (objects keep their keys in order) and fails the
 * parse on anything that is not JSON. Not fast, not general beyond what the
 * tests need (numbers are doubles; \u escapes below 0x80 only).
 */
#ifndef JSON_HELPERS_H
#define JSON_HELPERS_H

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum json_type { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY,
	JSON_OBJECT };

struct json {
	enum json_type type;
	bool boolean;
	double number;
	char *string;          /* JSON_STRING; the key's text for members */
	struct json **items;   /* array elements, object values */
	char **keys;           /* object keys */
	size_t count;
};

struct json_parser {
	const char *p;
	bool failed;
};

static void json_free(struct json *j);

static void
json_skip(struct json_parser *ps)
{
	while (*ps->p && isspace((unsigned char)*ps->p))
		ps->p++;
}

static char *
json_parse_string_raw(struct json_parser *ps)
{
	if (*ps->p != '"') {
		ps->failed = true;
		return NULL;
	}
	ps->p++;
	size_t cap = 16, len = 0;
	char *out = malloc(cap);
	while (*ps->p && *ps->p != '"') {
		char c = *ps->p++;
		if ((unsigned char)c < 0x20) {
			ps->failed = true;
			break;
		}
		if (c == '\\') {
			char e = *ps->p++;
			switch (e) {
			case '"': case '\\': case '/': c = e; break;
			case 'n': c = '\n'; break;
			case 't': c = '\t'; break;
			case 'r': c = '\r'; break;
			case 'b': c = '\b'; break;
			case 'f': c = '\f'; break;
			case 'u': {
				unsigned v = 0;
				for (int i = 0; i < 4; i++) {
					char h = *ps->p++;
					if (!isxdigit((unsigned char)h)) {
						ps->failed = true;
						break;
					}
					v = v * 16 + (unsigned)(isdigit(
							(unsigned char)h) ? h - '0'
							: (tolower(h) - 'a' + 10));
				}
				c = v < 0x80 ? (char)v : '?';
				break;
			}
			default:
				ps->failed = true;
				break;
			}
		}
		if (len + 2 > cap)
			out = realloc(out, cap *= 2);
		out[len++] = c;
	}
	if (*ps->p != '"')
		ps->failed = true;
	else
		ps->p++;
	out[len] = '\0';
	return out;
}

static struct json *
json_parse_value(struct json_parser *ps, int depth)
{
	json_skip(ps);
	struct json *j = calloc(1, sizeof(*j));
	if (depth > 64) {
		ps->failed = true;
		return j;
	}
	char c = *ps->p;
	if (c == '{' || c == '[') {
		bool object = c == '{';
		j->type = object ? JSON_OBJECT : JSON_ARRAY;
		ps->p++;
		json_skip(ps);
		size_t cap = 0;
		if (*ps->p == (object ? '}' : ']')) {
			ps->p++;
			return j;
		}
		for (;;) {
			char *key = NULL;
			json_skip(ps);
			if (object) {
				key = json_parse_string_raw(ps);
				json_skip(ps);
				if (ps->failed || *ps->p != ':') {
					ps->failed = true;
					free(key);
					return j;
				}
				ps->p++;
			}
			struct json *v = json_parse_value(ps, depth + 1);
			if (j->count == cap) {
				cap = cap ? cap * 2 : 8;
				j->items = realloc(j->items, cap * sizeof(*j->items));
				if (object)
					j->keys = realloc(j->keys, cap *
							sizeof(*j->keys));
			}
			j->items[j->count] = v;
			if (object)
				j->keys[j->count] = key;
			j->count++;
			if (ps->failed)
				return j;
			json_skip(ps);
			if (*ps->p == ',') {
				ps->p++;
				continue;
			}
			if (*ps->p == (object ? '}' : ']')) {
				ps->p++;
				return j;
			}
			ps->failed = true;
			return j;
		}
	}
	if (c == '"') {
		j->type = JSON_STRING;
		j->string = json_parse_string_raw(ps);
		return j;
	}
	if (strncmp(ps->p, "true", 4) == 0 || strncmp(ps->p, "false", 5) == 0) {
		j->type = JSON_BOOL;
		j->boolean = *ps->p == 't';
		ps->p += j->boolean ? 4 : 5;
		return j;
	}
	if (strncmp(ps->p, "null", 4) == 0) {
		ps->p += 4;
		return j;
	}
	char *end;
	j->type = JSON_NUMBER;
	j->number = strtod(ps->p, &end);
	if (end == ps->p || !(c == '-' || isdigit((unsigned char)c)))
		ps->failed = true;
	ps->p = end;
	return j;
}

/* The document in `text`, or NULL if it is not (only) JSON. */
static struct json *
json_parse(const char *text)
{
	struct json_parser ps = { text, false };
	struct json *j = json_parse_value(&ps, 0);
	json_skip(&ps);
	if (ps.failed || *ps.p != '\0') {
		json_free(j);
		return NULL;
	}
	return j;
}

static void
json_free(struct json *j)
{
	if (j == NULL)
		return;
	for (size_t i = 0; i < j->count; i++) {
		json_free(j->items[i]);
		if (j->keys)
			free(j->keys[i]);
	}
	free(j->items);
	free(j->keys);
	free(j->string);
	free(j);
}

/* An object's member, or NULL. */
static struct json *
json_get(const struct json *j, const char *key)
{
	if (j == NULL || j->type != JSON_OBJECT)
		return NULL;
	for (size_t i = 0; i < j->count; i++)
		if (strcmp(j->keys[i], key) == 0)
			return j->items[i];
	return NULL;
}

/* A member's text, or "" when it is missing or not a string. */
static const char *
json_str(const struct json *j, const char *key)
{
	struct json *v = json_get(j, key);
	return v && v->type == JSON_STRING ? v->string : "";
}

/* A member's number, or `fallback`. */
static double
json_num(const struct json *j, const char *key, double fallback)
{
	struct json *v = json_get(j, key);
	return v && v->type == JSON_NUMBER ? v->number : fallback;
}

static bool
json_true(const struct json *j, const char *key)
{
	struct json *v = json_get(j, key);
	return v && v->type == JSON_BOOL && v->boolean;
}

/* The whole file, NUL-terminated (NULL if it cannot be read). */
static char *
json_read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return NULL;
	size_t cap = 1 << 16, len = 0, n;
	char *buf = malloc(cap);
	while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (cap - len < 2)
			buf = realloc(buf, cap *= 2);
	}
	fclose(f);
	buf[len] = '\0';
	return buf;
}

#endif /* JSON_HELPERS_H */
