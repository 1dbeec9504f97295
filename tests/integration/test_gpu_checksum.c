/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Object checksums over GPU memory, through the CUDA test double (tests/unit/gpu_fake.h): a real
 * mooncake_master, store handles in this process with MOONCAKE_STORE_CHECKSUM=1, B holding a
 * segment, A a pure client whose buffers lie in the double's "device memory" (which the store
 * must not read with the CPU).  The engine checksums what it stages through pinned host chunks:
 *  - A's puts from device memory (whole values, and a value of a host part followed by a device
 *    part) carry the CRC-64 of their bytes to the master (/query_key object_checksum);
 *  - A's gets into device memory come back right and verified: after a byte of the replica
 *    rots in B's segment, the get answers -801 (its only replica failed) and the master is told.
 * Small staging chunks (MC_TE_GPU_CHUNK_SIZE) make every object cross several of them.
 */
#include <inttypes.h>
#include <stdint.h>

#include "common/crc64.h"
#include "mooncake/store_c.h"
#include "store/store.h"
#include "tap.h"

#define DEVLEN (32u << 20)
#include "gpu_fake.h"
#include "master_proc.h"

#define LEN ((3u << 20) + 4093)

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 13 + seed + (i >> 11));
}

/* The object's checksum and its first memory replica's address, from the master. */
static int query(const char *key, uint64_t *crc, uint64_t *addr)
{
	char path[256];
	json_t *j, *data, *r;
	const char *hex;
	size_t i;
	int rc = -1;

	snprintf(path, sizeof(path), "/query_key?key=%s", key);
	j = mp_admin_json(path);
	hex = json_string_value(json_object_get(j, "object_checksum"));
	data = json_object_get(j, "data");
	for (i = 0; hex && i < json_array_size(data); i++) {
		r = json_object_get(json_array_get(data, i), "buffer_address_");
		if (json_is_integer(r)) {
			*crc = strtoull(hex, NULL, 16);
			*addr = (uint64_t)json_integer_value(r);
			rc = 0;
			break;
		}
	}
	json_decref(j);
	return rc;
}

static mooncake_store_t handle(const char *master, uint64_t seg)
{
	mooncake_store_t s = mooncake_store_create();

	if (s && mooncake_store_setup(s, "127.0.0.1", "P2PHANDSHAKE", seg, 16u << 20, "tcp", "",
				      master) != 0) {
		mooncake_store_destroy(s);
		return NULL;
	}
	return s;
}

int main(void)
{
	uint8_t *host = malloc(LEN), *back = malloc(LEN);
	mooncake_replicate_config_t one = { .replica_num = 1 };
	mooncake_store_t a = NULL, b = NULL;
	char master[64];
	uint64_t crc = 0, addr = 0, want;
	int port;

	dev = malloc(DEVLEN);
	if (!host || !back || !dev) {
		printf("1..0 # SKIP out of memory\n");
		return 77;
	}
	setenv("MOONCAKE_STORE_CHECKSUM", "1", 1);
	setenv("MC_TE_GPU_CHUNK_SIZE", "262144", 1);
	setenv("MC_STORE_SHM", "0", 1);		/* the tcp transport under the staging */
	mc_gpu_set_ops(&fake);
	port = mp_free_port();
	if (port <= 0 || mp_start_master(port, NULL)) {
		printf("1..0 # SKIP no mooncake_master\n");
		mp_stop_master();
		return 77;
	}
	snprintf(master, sizeof(master), "127.0.0.1:%d", port);
	b = handle(master, 64u << 20);
	a = handle(master, 0);
	ok(a && b, "store handles up (B with a 64 MiB segment, A a client on device memory)");
	if (!a || !b)
		goto out;

	/* 1. A whole value in device memory. */
	fill(dev + 5, LEN, 1);
	is(mooncake_store_put(a, "gpu/whole", dev + 5, LEN, &one), 0, "put from device memory");
	want = mc_crc64(0, dev + 5, LEN);
	ok(query("gpu/whole", &crc, &addr) == 0 && crc == want,
	   "the master keeps the CRC-64 of the device bytes (got %016" PRIx64 ", expected %016" PRIx64
	   ")", crc, want);
	ok(n_d2h > 0, "the put staged the device bytes through pinned chunks (%d copies)", n_d2h);

	/* 2. A value of two parts: host bytes, then device bytes. */
	{
		struct mc_iov parts[2] = { { host, 1000 }, { dev + (8u << 20), LEN - 1000 } };
		struct mc_put_item it = { .key = "gpu/mixed", .iov = parts, .iovcnt = 2,
					  .size = LEN };
		struct mc_rpc_config cfg;

		fill(host, 1000, 2);
		fill(dev + (8u << 20), LEN - 1000, 3);
		memcpy(back, host, 1000);
		memcpy(back + 1000, dev + (8u << 20), LEN - 1000);
		mc_store_config_from_c(&cfg, 1, 0, 0, NULL, 0);
		mc_store_put_many((struct mc_store *)a, &it, 1, &cfg, 0);
		is(it.result, 0, "put of a host part followed by a device part");
		want = mc_crc64(0, back, LEN);
		ok(query("gpu/mixed", &crc, &addr) == 0 && crc == want,
		   "its checksum is that of the parts in order (got %016" PRIx64 ", expected %016" PRIx64
		   ")", crc, want);
	}

	/* 3. Gets into device memory, verified on the staging chunks. */
	memset(dev + (16u << 20), 0, LEN);
	is(mooncake_store_get_into(a, "gpu/whole", dev + (16u << 20), LEN), (int64_t)LEN,
	   "get of gpu/whole into device memory");
	ok(!memcmp(dev + (16u << 20), dev + 5, LEN), "the device memory holds the right bytes");
	is(mooncake_store_get_into(a, "gpu/mixed", back, LEN), (int64_t)LEN,
	   "gpu/mixed reads back into host memory, verified");

	/* 4. A byte of gpu/whole's only replica rots in B's segment (this process). */
	if (query("gpu/whole", &crc, &addr) == 0)
		((uint8_t *)(uintptr_t)addr)[LEN / 2] ^= 0x40;
	is(mooncake_store_get_into(a, "gpu/whole", dev + (16u << 20), LEN), (int64_t)-801,
	   "a get into device memory of a rotted object answers -801 (CHECKSUM_MISMATCH)");
	{
		json_t *m = NULL;
		int found = 0, tries;

		/* The report is sent without waiting: the master drops the object soon after. */
		for (tries = 0; tries < 100 && !found; tries++) {
			m = mp_admin_json("/query_key?key=gpu/whole");
			found = m == NULL;
			json_decref(m);
			if (!found)
				usleep(20000);
		}
		ok(found, "the master was told and dropped the object with no good replica");
	}
out:
	if (a)
		mooncake_store_destroy(a);
	if (b)
		mooncake_store_destroy(b);
	mp_stop_master();
	mc_gpu_set_ops(NULL);
	free(dev);
	free(host);
	free(back);
	return tap_done();
}
