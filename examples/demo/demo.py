# The demo program in Python: the same curation as demo.ts.
import json

hosts = json.loads(await tools.inventory({}))
down, slow = [], []
for h in hosts:
    p = json.loads(await tools["probe-host"]({"host": h["name"]}))
    if not p["healthy"]:
        down.append(f"{h['name']} ({h['role']}, {h['region']})")
    elif p["latency_ms"] > 100:
        slow.append(f"{h['name']} {p['latency_ms']}ms")
try:
    await tools["probe-host"]({"host": "not-a-host"})
except ToolCallError as e:
    print(f"a bad probe is reported, not fatal: {e}")
return {"checked": len(hosts), "healthy": len(hosts) - len(down), "down": down, "slow": slow}
