// node-redis (npm `redis` 4) against tiercache's Redis port:
// set/get/mget/incr/expire/hash/pipeline. Run by redis_test.py:
//   NODE_PATH=<dir>/node_modules node redis_node_test.js PORT
// Prints "node-redis: ok" or throws.
const { createClient } = require("redis");
const assert = require("assert");

(async () => {
  const port = Number(process.argv[2]);
  const c = createClient({ socket: { host: "127.0.0.1", port } });
  c.on("error", (e) => { throw e; });
  await c.connect();
  assert.strictEqual(await c.ping(), "PONG");
  assert.strictEqual(await c.set("node:a", "1"), "OK");
  assert.strictEqual(await c.get("node:a"), "1");
  assert.deepStrictEqual(await c.mGet(["node:a", "node:none"]), ["1", null]);
  const n = await c.incr("node:n");
  assert.ok(n >= 1);
  assert.strictEqual(await c.expire("node:a", 100), true);
  const ttl = await c.ttl("node:a");
  assert.ok(ttl >= 99 && ttl <= 100, "ttl " + ttl);
  await c.del("node:h");
  assert.strictEqual(await c.hSet("node:h", { f: "v", g: "w" }), 2);
  assert.deepStrictEqual({ ...(await c.hGetAll("node:h")) }, { f: "v", g: "w" });
  // A transaction on one key (tiercache runs one on one shard's keys).
  const r = await c.multi().set("node:t", "1").incr("node:t").get("node:t").exec();
  assert.deepStrictEqual(r, ["OK", 2, "2"]);
  await Promise.all([...Array(50).keys()].map((i) => c.set("node:p" + i, String(i))));
  // Auto-pipelined commands (sent together, answered in order).
  const all = await Promise.all([...Array(100).keys()].map((i) => c.get("node:p" + (i % 50))));
  assert.strictEqual(all[42], "42");
  await c.quit();
  console.log("node-redis: ok");
})().catch((e) => { console.error("node-redis: FAILED " + e); process.exit(1); });
