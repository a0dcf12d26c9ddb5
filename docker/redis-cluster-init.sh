#!/bin/sh
# docker-compose.yml's `redis-cluster-init`: joins the nodes given as host:port into one
# Redis Cluster with one replica per master (the first half become masters), then waits
# until the cluster says it is ok, so the app starts against a cluster that serves
# every slot. Idempotent: a node that already serves slots means the cluster was made
# on an earlier `up` (its nodes.conf is in its volume), and nothing is created again.
# Addresses, not host names: CLUSTER MEET takes an IP.
set -eu

[ "$#" -ge 6 ] || {
  echo "usage: $0 host:port ... (six or more nodes)" >&2
  exit 2
}
first=$1
host=${first%:*}
port=${first##*:}

# One field of the first node's CLUSTER INFO; empty when the node cannot be read.
field() { redis-cli -h "$host" -p "$port" cluster info 2>/dev/null | tr -d '\r' | sed -n "s/^$1://p"; }

slots=$(field cluster_slots_assigned)
case "$slots" in
  '')
    echo "redis-cluster-init: cannot read CLUSTER INFO from $first (is it up, with cluster-enabled yes?)" >&2
    exit 1
    ;;
  0) redis-cli --cluster create "$@" --cluster-replicas 1 --cluster-yes ;;
  *) echo "redis-cluster-init: $first already serves $slots slots: the cluster exists, nothing to create" ;;
esac

# The nodes agree through gossip a moment after the create; the app waits for this.
tries=0
until [ "$(field cluster_state)" = ok ]; do
  tries=$((tries + 1))
  if [ "$tries" -ge 60 ]; then
    echo "redis-cluster-init: cluster_state is not ok after 60 s" >&2
    redis-cli -h "$host" -p "$port" cluster info >&2 || true
    exit 1
  fi
  sleep 1
done
redis-cli -h "$host" -p "$port" cluster nodes
echo "redis-cluster-init: cluster_state:ok"
