import os, random, sys, tempfile, time, shale
n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
rng = random.Random(1)
keys = [rng.randbytes(16) for _ in range(n)]
vals = [rng.randbytes(100) for _ in range(n)]
d = tempfile.mkdtemp(dir="/work")
db = shale.Db(os.path.join(d, "db"))
put = db.put
t = time.perf_counter()
for k, v in zip(keys, vals):
    put(k, v)
el = time.perf_counter() - t
print(f"put {n/el:,.0f}/s {el/n*1e6:.2f} us")
db.close()
