# What the registry scripts share (sourced, from the workspace root): Debian's docker-registry
# and jq, installed when missing, and `serve NAME [AUTH-YAML]`, a registry on a free loopback
# port, stopped when the script exits.
missing=()
command -v docker-registry >/dev/null 2>&1 || missing+=(docker-registry)
command -v jq >/dev/null 2>&1 || missing+=(jq)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]} (Debian packages)"
  export DEBIAN_FRONTEND=noninteractive
  sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo --preserve-env=DEBIAN_FRONTEND"
  $sudo apt-get update -qq >/dev/null
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$work"' EXIT
# serve NAME [AUTH-YAML]: a registry on a free loopback port, storage under $work/NAME; sets
# $served to the port once it answers (401 counts: an authenticating registry answers without
# credentials).
serve() {
  local name=$1 auth=${2:-} port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  cat > "$work/$name.yml" <<CONF
version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: $work/$name}
http:
  addr: 127.0.0.1:$port
$auth
CONF
  docker-registry serve "$work/$name.yml" > "$work/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 50); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v2/")" != 000 ] && break
    sleep 0.2
  done
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v2/")" != 000 ] ||
    { cat "$work/$name.log" >&2; exit 1; }
  served=$port
}
