/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Codec for the master RPC protocol (see rpc.h and doc/protocol.md).  Shared by the master and
 * the store client so both ends agree on every byte.  Decoders treat input as hostile: every
 * string and count is bounded, and failures are sticky in the reader's err field.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "proto/rpc.h"

int mc_uuid_generate(struct mc_uuid *u)
{
	size_t got = 0;

	while (got < sizeof(u->b)) {
		ssize_t n = getrandom(u->b + got, sizeof(u->b) - got, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		got += (size_t)n;
	}
	u->b[6] = (uint8_t)((u->b[6] & 0x0f) | 0x40);
	u->b[8] = (uint8_t)((u->b[8] & 0x3f) | 0x80);
	return 0;
}

int mc_rpc_tenant_valid(const char *name, size_t len)
{
	size_t i;

	if (len == 0 || len > MC_RPC_MAX_NAME || name[0] == '_')
		return 0;
	for (i = 0; i < len; i++)
		if ((unsigned char)name[i] < 0x20 || (unsigned char)name[i] >= 0x7f)
			return 0;
	return 1;
}

void mc_uuid_to_pair(const struct mc_uuid *u, uint64_t *first, uint64_t *second)
{
	uint64_t a = 0, b = 0;
	int i;

	for (i = 7; i >= 0; i--) {
		a = a << 8 | u->b[i];
		b = b << 8 | u->b[8 + i];
	}
	*first = a;
	*second = b;
}

void mc_uuid_from_pair(struct mc_uuid *u, uint64_t first, uint64_t second)
{
	int i;

	for (i = 0; i < 8; i++) {
		u->b[i] = (uint8_t)(first >> (8 * i));
		u->b[8 + i] = (uint8_t)(second >> (8 * i));
	}
}

void mc_uuid_pair_format(const struct mc_uuid *u, char *out)
{
	uint64_t a, b;

	mc_uuid_to_pair(u, &a, &b);
	snprintf(out, 42, "%llu-%llu", (unsigned long long)a, (unsigned long long)b);
}

int mc_uuid_pair_parse(const char *s, struct mc_uuid *u)
{
	unsigned long long a, b;
	char *end;

	if (s == NULL || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	a = strtoull(s, &end, 10);
	if (errno || *end != '-' || end[1] < '0' || end[1] > '9')
		return -1;
	b = strtoull(end + 1, &end, 10);
	if (errno || *end)
		return -1;
	mc_uuid_from_pair(u, a, b);
	return 0;
}

void mc_uuid_format(const struct mc_uuid *u, char *out)
{
	static const char hex[] = "0123456789abcdef";
	size_t i, o = 0;

	for (i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hex[u->b[i] >> 4];
		out[o++] = hex[u->b[i] & 15];
	}
	out[o] = '\0';
}

int mc_uuid_is_nil(const struct mc_uuid *u)
{
	size_t i;

	for (i = 0; i < 16; i++)
		if (u->b[i])
			return 0;
	return 1;
}

void mc_rpc_hdr_encode(uint8_t out[MC_RPC_HDR_LEN], const struct mc_rpc_hdr *h)
{
	mc_put_le32(out, MC_RPC_MAGIC);
	out[4] = MC_RPC_VERSION;
	out[5] = h->kind;
	out[6] = (uint8_t)h->opcode;
	out[7] = (uint8_t)(h->opcode >> 8);
	mc_put_le32(out + 8, h->body_len);
	mc_put_le32(out + 12, (uint32_t)h->status);
	mc_put_le64(out + 16, h->req_id);
}

int mc_rpc_hdr_decode(const uint8_t in[MC_RPC_HDR_LEN], struct mc_rpc_hdr *h, uint32_t max_body)
{
	h->magic = mc_get_le32(in);
	h->version = in[4];
	h->kind = in[5];
	h->opcode = (uint16_t)(in[6] | in[7] << 8);
	h->body_len = mc_get_le32(in + 8);
	h->status = (int32_t)mc_get_le32(in + 12);
	h->req_id = mc_get_le64(in + 16);
	if (h->magic != MC_RPC_MAGIC || h->kind > MC_RPC_RESPONSE)
		return -EPROTO;
	if (h->version != MC_RPC_VERSION)
		return -EPROTONOSUPPORT;
	if (h->body_len > max_body)
		return -EMSGSIZE;
	return 0;
}

void mc_rpc_frame_begin(struct mc_wbuf *w, uint8_t kind, uint16_t opcode, int32_t status,
			uint64_t req_id)
{
	struct mc_rpc_hdr h = {
		.kind = kind, .opcode = opcode, .status = status, .req_id = req_id,
	};
	uint8_t *p = mc_wbuf_reserve(w, MC_RPC_HDR_LEN);

	if (p != NULL)
		mc_rpc_hdr_encode(p, &h);
}

void mc_rpc_frame_end(struct mc_wbuf *w, size_t start)
{
	if (w->err == 0 && w->len >= start + MC_RPC_HDR_LEN) {
		size_t body = w->len - start - MC_RPC_HDR_LEN;

		if (body > UINT32_MAX) {
			w->err = -EMSGSIZE;
			return;
		}
		mc_put_le32(w->data + start + 8, (uint32_t)body);
	}
}

void mc_rpc_put_uuid(struct mc_wbuf *w, const struct mc_uuid *u)
{
	mc_wbuf_put(w, u->b, sizeof(u->b));
}

void mc_rpc_get_uuid(struct mc_rbuf *r, struct mc_uuid *u)
{
	const uint8_t *p = mc_rbuf_bytes(r, sizeof(u->b));

	if (p != NULL)
		memcpy(u->b, p, sizeof(u->b));
	else
		memset(u->b, 0, sizeof(u->b));
}

void mc_rpc_put_strv(struct mc_wbuf *w, struct mc_strv s)
{
	mc_wbuf_str(w, s.p, s.n);
}

struct mc_strv mc_rpc_get_strv(struct mc_rbuf *r, size_t max)
{
	struct mc_strv v = { "", 0 };
	size_t n;
	const char *p = mc_rbuf_str(r, max, &n);

	if (p != NULL) {
		v.p = p;
		v.n = (uint32_t)n;
	}
	return v;
}

void mc_rpc_put_segment(struct mc_wbuf *w, const struct mc_rpc_segment *s)
{
	mc_rpc_put_uuid(w, &s->id);
	mc_rpc_put_strv(w, s->name);
	mc_wbuf_u64(w, s->base);
	mc_wbuf_u64(w, s->size);
	mc_rpc_put_strv(w, s->endpoint);
	mc_rpc_put_strv(w, s->protocol);
}

void mc_rpc_get_segment(struct mc_rbuf *r, struct mc_rpc_segment *s)
{
	mc_rpc_get_uuid(r, &s->id);
	s->name = mc_rpc_get_strv(r, MC_RPC_MAX_NAME);
	s->base = mc_rbuf_u64(r);
	s->size = mc_rbuf_u64(r);
	s->endpoint = mc_rpc_get_strv(r, MC_RPC_MAX_NAME);
	s->protocol = mc_rpc_get_strv(r, MC_RPC_MAX_PROTO);
}

void mc_rpc_config_default(struct mc_rpc_config *c)
{
	memset(c, 0, sizeof(*c));
	c->replica_num = 1;
	c->preferred_segment = mc_strv_c("");
}

void mc_rpc_put_config(struct mc_wbuf *w, const struct mc_rpc_config *c)
{
	uint32_t i;

	mc_wbuf_u32(w, c->replica_num);
	mc_wbuf_u8(w, c->with_hard_pin);
	mc_wbuf_u8(w, c->soft_pin_action);
	mc_wbuf_u8(w, c->has_soft_pin_ttl);
	mc_wbuf_u64(w, c->soft_pin_ttl_ms);
	mc_wbuf_u8(w, c->prefer_alloc_in_same_node);
	mc_wbuf_u32(w, c->data_type);
	mc_rpc_put_strv(w, c->preferred_segment);
	mc_wbuf_u32(w, c->n_preferred);
	for (i = 0; i < c->n_preferred && i < MC_RPC_MAX_PREFERRED; i++)
		mc_rpc_put_strv(w, c->preferred[i]);
}

void mc_rpc_get_config(struct mc_rbuf *r, struct mc_rpc_config *c)
{
	uint32_t i;

	mc_rpc_config_default(c);
	c->replica_num = mc_rbuf_u32(r);
	c->with_hard_pin = mc_rbuf_u8(r);
	c->soft_pin_action = mc_rbuf_u8(r);
	c->has_soft_pin_ttl = mc_rbuf_u8(r);
	c->soft_pin_ttl_ms = mc_rbuf_u64(r);
	c->prefer_alloc_in_same_node = mc_rbuf_u8(r);
	c->data_type = mc_rbuf_u32(r);
	c->preferred_segment = mc_rpc_get_strv(r, MC_RPC_MAX_NAME);
	c->n_preferred = mc_rbuf_count(r, MC_RPC_MAX_PREFERRED, 4);
	for (i = 0; i < c->n_preferred; i++)
		c->preferred[i] = mc_rpc_get_strv(r, MC_RPC_MAX_NAME);
	if (c->soft_pin_action > MC_SOFT_PIN_DISABLE && r->err == 0)
		r->err = -EBADMSG;
}

void mc_rpc_put_evict_hint(struct mc_wbuf *w, const struct mc_rpc_config *c)
{
	if (c->has_evict_hint)
		mc_wbuf_u8(w, c->evict_hint);
}

void mc_rpc_get_evict_hint(struct mc_rbuf *r, struct mc_rpc_config *c)
{
	if (r->err || r->left != 1)
		return;
	c->evict_hint = mc_rbuf_u8(r);
	c->has_evict_hint = 1;
	if (c->evict_hint & ~MC_EVICT_HINT_MASK)
		r->err = -EBADMSG;
}

void mc_rpc_put_replica(struct mc_wbuf *w, const struct mc_rpc_replica *rep)
{
	mc_wbuf_u64(w, rep->id);
	mc_wbuf_u8(w, rep->type);
	mc_wbuf_u8(w, rep->status);
	mc_wbuf_u64(w, rep->size);
	switch (rep->type) {
	case MC_REPLICA_MEMORY:
		mc_wbuf_u64(w, rep->addr);
		mc_rpc_put_strv(w, rep->segment_name);
		mc_rpc_put_strv(w, rep->endpoint);
		mc_rpc_put_strv(w, rep->protocol);
		break;
	case MC_REPLICA_DISK:
		mc_rpc_put_strv(w, rep->path);
		break;
	case MC_REPLICA_LOCAL_DISK:
		mc_rpc_put_uuid(w, &rep->client_id);
		mc_rpc_put_strv(w, rep->endpoint);
		mc_wbuf_u64(w, rep->addr);
		break;
	default:
		w->err = -EINVAL;
		break;
	}
}

void mc_rpc_get_replica(struct mc_rbuf *r, struct mc_rpc_replica *rep)
{
	memset(rep, 0, sizeof(*rep));
	rep->segment_name = rep->endpoint = rep->protocol = rep->path = mc_strv_c("");
	rep->id = mc_rbuf_u64(r);
	rep->type = mc_rbuf_u8(r);
	rep->status = mc_rbuf_u8(r);
	rep->size = mc_rbuf_u64(r);
	if (r->err)
		return;
	switch (rep->type) {
	case MC_REPLICA_MEMORY:
		rep->addr = mc_rbuf_u64(r);
		rep->segment_name = mc_rpc_get_strv(r, MC_RPC_MAX_NAME);
		rep->endpoint = mc_rpc_get_strv(r, MC_RPC_MAX_NAME);
		rep->protocol = mc_rpc_get_strv(r, MC_RPC_MAX_PROTO);
		break;
	case MC_REPLICA_DISK:
		rep->path = mc_rpc_get_strv(r, MC_RPC_MAX_PATH);
		break;
	case MC_REPLICA_LOCAL_DISK:
		mc_rpc_get_uuid(r, &rep->client_id);
		rep->endpoint = mc_rpc_get_strv(r, MC_RPC_MAX_NAME);
		rep->addr = mc_rbuf_u64(r);
		break;
	default:
		r->err = -EBADMSG;
		break;
	}
}

void mc_rpc_put_xfer_failure(struct mc_wbuf *w, const struct mc_rpc_xfer_failure *f)
{
	mc_rpc_put_strv(w, f->segment);
	mc_wbuf_i32(w, f->code);
}

void mc_rpc_get_xfer_failure(struct mc_rbuf *r, struct mc_rpc_xfer_failure *f)
{
	f->segment = mc_rpc_get_strv(r, MC_RPC_MAX_NAME);
	f->code = mc_rbuf_i32(r);
}

void mc_rpc_put_checksums(struct mc_wbuf *w, const struct mc_rpc_checksum *c, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		mc_wbuf_u8(w, c[i].present ? 1 : 0);
		mc_wbuf_u64(w, c[i].present ? c[i].value : 0);
	}
}

int mc_rpc_get_checksums(struct mc_rbuf *r, struct mc_rpc_checksum *c, uint32_t n)
{
	uint32_t i;

	memset(c, 0, (size_t)n * sizeof(*c));
	if (r->err)
		return -1;
	if (r->left == 0)
		return 0;
	if (r->left != (size_t)n * MC_RPC_CHECKSUM_BYTES) {
		r->err = -EBADMSG;
		return -1;
	}
	for (i = 0; i < n; i++) {
		uint8_t present = mc_rbuf_u8(r);

		c[i].value = mc_rbuf_u64(r);
		if (present > 1 || (!present && c[i].value != 0)) {
			r->err = -EBADMSG;
			memset(c, 0, (size_t)n * sizeof(*c));
			return -1;
		}
		c[i].present = present;
	}
	return r->err ? -1 : 1;
}

void mc_rpc_put_corrupt_replica(struct mc_wbuf *w, const struct mc_rpc_corrupt_replica *c)
{
	mc_rpc_put_strv(w, c->key);
	mc_wbuf_u64(w, c->replica_id);
	mc_wbuf_u64(w, c->expected);
	mc_wbuf_u64(w, c->computed);
}

void mc_rpc_get_corrupt_replica(struct mc_rbuf *r, struct mc_rpc_corrupt_replica *c)
{
	c->key = mc_rpc_get_strv(r, MC_RPC_MAX_KEY);
	c->replica_id = mc_rbuf_u64(r);
	c->expected = mc_rbuf_u64(r);
	c->computed = mc_rbuf_u64(r);
}

uint32_t mc_rpc_deadline_encode(int64_t wall_ms)
{
	uint32_t dl = (uint32_t)(uint64_t)wall_ms;

	return dl ? dl : 1;
}

int mc_rpc_deadline_expired(uint32_t dl, int64_t now_ms, uint32_t tolerance_ms)
{
	int32_t late;

	if (dl == 0)
		return 0;
	late = (int32_t)((uint32_t)(uint64_t)now_ms - dl);
	return late > 0 && (uint32_t)late > tolerance_ms;
}

const char *mc_rpc_op_name(uint16_t op)
{
#define MC_RPC_OP_CASE(sym, code, name, metric, batch, durable, handler) \
	case code: return name;
	switch (op) {
	MC_RPC_OPS(MC_RPC_OP_CASE)
	default: return "Unknown";
	}
#undef MC_RPC_OP_CASE
}
