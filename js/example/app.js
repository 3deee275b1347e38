// Renders the catalog of the bundled example cluster for a chosen user and namespace.
import init, { catalog } from "../pkg/cozystack_resolver.js";

await init();
const cluster = await (await fetch(new URL("cluster.json", import.meta.url))).json();
const users = document.getElementById("user");
const namespaces = document.getElementById("namespace");
for (const [i, user] of cluster.users.entries()) users.add(new Option(user.title, String(i)));
for (const ns of cluster.namespaces) namespaces.add(new Option(ns.name, ns.name));

function render() {
  const user = cluster.users[Number(users.value)];
  const namespace = cluster.namespaces.find((ns) => ns.name === namespaces.value);
  const entries = JSON.parse(catalog(
    JSON.stringify(cluster.definitions),
    JSON.stringify({ username: user.username, groups: user.groups }),
    JSON.stringify(namespace),
    JSON.stringify(cluster.instances),
    JSON.stringify(cluster.settings),
    // The user's RBAC in the namespace, as a SelfSubjectRulesReview answers it.
    JSON.stringify(user.access),
  ));
  const lists = { marketplace: document.getElementById("marketplace"), modules: document.getElementById("modules") };
  for (const list of Object.values(lists)) list.replaceChildren();
  const hidden = [];
  for (const entry of entries) {
    if (entry.placement === "hidden") { hidden.push(entry.kind); continue; }
    const item = document.createElement("li");
    item.dataset.kind = entry.kind;
    const name = Object.assign(document.createElement("span"), { className: "kind", textContent: entry.kind });
    // A kind held by its names is created under the slot the verdict was computed for.
    const label = entry.slot ? `Create ${entry.slot}` : "Create";
    const button = Object.assign(document.createElement("button"), { textContent: label, disabled: !entry.canCreate });
    if (entry.slot) item.dataset.slot = entry.slot;
    item.append(name, button);
    if (entry.reason) item.append(Object.assign(document.createElement("span"), { className: "reason", textContent: entry.reason }));
    if (entry.refusedBy) item.dataset.refusedBy = entry.refusedBy;
    for (const w of entry.warnings ?? []) item.append(Object.assign(document.createElement("span"), { className: "warning", textContent: w }));
    lists[entry.placement].append(item);
  }
  document.getElementById("hidden").textContent = hidden.length ? `Not shown (hidden): ${hidden.join(", ")}` : "";
  document.body.dataset.ready = `${users.value}/${namespaces.value}`;
}

users.addEventListener("change", render);
namespaces.addEventListener("change", render);
render();
