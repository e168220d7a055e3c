// The demo program: what a model would write in Code Mode. It calls two
// host tools, loops and branches over their results, and returns only a
// curated answer — the intermediate results never leave the container.
type Host = { name: string; region: string; role: string };
type Probe = { host: string; latency_ms: number; healthy: boolean };

const hosts: Host[] = JSON.parse(await tools["inventory"]({}));
const down: string[] = [];
const slow: string[] = [];
for (const h of hosts) {
  const p: Probe = JSON.parse(await tools["probe-host"]({ host: h.name }));
  if (!p.healthy) down.push(`${h.name} (${h.role}, ${h.region})`);
  else if (p.latency_ms > 100) slow.push(`${h.name} ${p.latency_ms}ms`);
}
try {
  await tools["probe-host"]({ host: "not-a-host" });
} catch (e) {
  console.log(`a bad probe is reported, not fatal: ${(e as Error).message}`);
}
return {
  checked: hosts.length,
  healthy: hosts.length - down.length,
  down,
  slow,
};
