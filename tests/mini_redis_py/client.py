"""redis-py against examples/mini_redis (run by tests/mini_redis_py.rs).

    python client.py PORT default|2|3

"default" leaves the protocol to redis-py (RESP3 from redis-py 8 on);
2 or 3 asks for it. Every check raises on failure, so the exit status
says whether all of it passed; the last line printed names what ran.
"""

import sys
import threading

import redis

PORT = int(sys.argv[1])
WANT = sys.argv[2]
KW = {} if WANT == "default" else {"protocol": int(WANT)}


def client(**extra):
    return redis.Redis(
        host="127.0.0.1",
        port=PORT,
        decode_responses=True,
        socket_timeout=20,
        **KW,
        **extra,
    )


def check(got, want, what):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, want {want!r}")


def negotiated(r):
    """The protocol the pool's connections speak, as HELLO reported it."""
    conn = r.connection_pool.get_connection()
    try:
        return int(conn.get_protocol() or 2)
    finally:
        r.connection_pool.release(conn)


def basics(r):
    check(r.ping(), True, "PING")
    r.flushdb()
    check(r.set("greeting", "hello"), True, "SET")
    check(r.get("greeting"), "hello", "GET")
    check(r.get("missing"), None, "GET of a missing key")
    check(r.set("greeting", "x", nx=True), None, "SET NX on a key that exists")
    check(r.incr("n", 5), 5, "INCRBY")
    check(r.decr("n"), 4, "DECR")
    check(r.set("ttl", "v", ex=100), True, "SET EX")
    check(r.ttl("ttl"), 100, "TTL")
    check(r.rpush("l", "a", "b", "c"), 3, "RPUSH")
    check(r.lrange("l", 0, -1), ["a", "b", "c"], "LRANGE")
    check(r.lpop("l"), "a", "LPOP")
    check(r.lpop("l", 5), ["b", "c"], "LPOP with a count")
    check(r.lpop("l", 5), None, "LPOP with a count of a missing key")
    check(r.mget("greeting", "missing", "n"), ["hello", None, "4"], "MGET")
    check(r.exists("greeting", "missing"), 1, "EXISTS")
    check(r.delete("greeting", "missing"), 1, "DEL")
    check(r.config_get("appendonly"), {"appendonly": "no"}, "CONFIG GET")
    check(r.info()["redis_version"], "7.0.15", "INFO")
    try:
        r.incr("ttl")
        raise AssertionError("INCR of a non-integer did not fail")
    except redis.ResponseError as e:
        check(str(e), "value is not an integer or out of range", "INCR error")
    # The handshake's CLIENT calls.
    check(r.client_setname("py-client"), True, "CLIENT SETNAME")
    check(r.client_getname(), "py-client", "CLIENT GETNAME")
    check(isinstance(r.client_id(), int), True, "CLIENT ID")
    info = r.client_info()
    # redis-py sent CLIENT SETINFO when it connected.
    check(info["lib-name"], "redis-py", "CLIENT INFO lib-name")
    check(info["lib-ver"], redis.__version__, "CLIENT INFO lib-ver")
    check(int(info["resp"]), negotiated(r), "CLIENT INFO resp")


def pipelines(r):
    # The default pipeline is a transaction: MULTI ... EXEC.
    with r.pipeline() as p:
        for i in range(100):
            p.set(f"k{i}", i)
            p.incr("counter")
        p.get("k7").lrange("nothing", 0, -1).get("missing")
        got = p.execute()
    check(got[:4], [True, 1, True, 2], "transaction's first replies")
    check(got[-3:], ["7", [], None], "transaction's last replies")
    # Without MULTI, and with an error in the middle.
    with r.pipeline(transaction=False) as p:
        p.set("s", "v").incr("s").get("s")
        got = p.execute(raise_on_error=False)
    check(got[0], True, "pipeline SET")
    check(isinstance(got[1], redis.ResponseError), True, "pipeline error")
    check(got[2], "v", "pipeline GET after an error")
    check(r.get("counter"), "100", "counter after the transaction")


def pubsub(r):
    p = r.pubsub()
    p.subscribe("news", "sport")
    for channel in ("news", "sport"):
        m = p.get_message(timeout=20)
        check((m["type"], m["channel"]), ("subscribe", channel), "confirmation")
    check(r.publish("news", "fibers"), 1, "PUBLISH")
    m = p.get_message(timeout=20)
    check((m["type"], m["channel"], m["data"]), ("message", "news", "fibers"), "message")
    # Messages arriving while redis-py also reads its own replies.
    for i in range(50):
        r.publish("sport", f"m{i}")
    got = []
    while len(got) < 50:
        m = p.get_message(timeout=20)
        if m is None:
            raise AssertionError(f"only {len(got)} of 50 messages came")
        got.append(m["data"])
    check(got, [f"m{i}" for i in range(50)], "messages in order")
    p.unsubscribe("news")
    m = p.get_message(timeout=20)
    check((m["type"], m["channel"], m["data"]), ("unsubscribe", "news", 1), "unsubscribe")
    check(r.publish("news", "nobody"), 0, "PUBLISH to no one")
    p.close()
    # A handler thread on a PubSub of its own, as applications use it.
    seen = []
    done = threading.Event()

    def handler(message):
        if message["data"] != "probe":
            seen.append(message["data"])
        if len(seen) == 10:
            done.set()

    q = r.pubsub()
    q.subscribe(threaded=handler)
    worker = q.run_in_thread(sleep_time=0.01, daemon=True)
    # Publish for real once the server has the subscription.
    for _ in range(2000):
        if r.publish("threaded", "probe") == 1:
            break
        threading.Event().wait(0.01)
    for i in range(10):
        r.publish("threaded", f"t{i}")
    if not done.wait(20):
        raise AssertionError(f"the handler thread saw {seen!r}")
    worker.stop()
    worker.join(20)
    q.close()


def pool_of_threads():
    pool = redis.ConnectionPool(
        host="127.0.0.1",
        port=PORT,
        decode_responses=True,
        max_connections=20,
        socket_timeout=20,
        **KW,
    )
    r = redis.Redis(connection_pool=pool)
    r.delete("hits")
    errors = []

    def work(t):
        try:
            for i in range(200):
                key = f"t{t}:{i}"
                r.set(key, i)
                check(r.get(key), str(i), key)
                r.incr("hits")
                r.rpush(f"t{t}:list", i)
            check(r.llen(f"t{t}:list"), 200, f"thread {t}'s list")
        except Exception as e:  # reported below, with the thread
            errors.append(f"thread {t}: {e!r}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise AssertionError("; ".join(errors))
    check(r.get("hits"), "4000", "hits from 20 threads")
    pool.disconnect()


def main():
    r = client()
    proto = negotiated(r)
    if WANT == "default":
        major = int(redis.__version__.split(".")[0])
        check(proto, 3 if major >= 8 else 2, "redis-py's default protocol")
    else:
        check(proto, int(WANT), "the protocol asked for")
    basics(r)
    pipelines(r)
    pubsub(r)
    pool_of_threads()
    print(f"redis-py {redis.__version__} over RESP{proto} ({WANT}): all passed")


main()
