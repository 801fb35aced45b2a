# nodenet.sh (sourced) - the names and addresses of one real node (scripts/node.sh), chosen by
# KFOLD_NODE_INDEX (a digit, 0 by default), so that several control plane instances on one machine
# each serve a real node of their own: index i has the network namespace kfold-node[-i], the veth
# kfold-h<i> (host, 10.250.<i>.1/30) <-> kfold-n<i> (node, 10.250.<i>.2/30), the pod CIDR
# 10.245.<i>.0/24 and the cgroup /kfold-node[-i]. Index 0 keeps the unsuffixed names.
NODE_INDEX=${KFOLD_NODE_INDEX:-0}
if ! [[ $NODE_INDEX =~ ^[0-9]$ ]]; then
  echo "KFOLD_NODE_INDEX=$NODE_INDEX is not a digit 0-9: unset it or give one index per real node" >&2
  exit 2
fi
NODE_SUFFIX=$([[ $NODE_INDEX == 0 ]] || echo "-$NODE_INDEX")
NODE_NETNS=${KFOLD_NODE_NETNS:-kfold-node$NODE_SUFFIX}
NODE_HOST_IF=kfold-h$NODE_INDEX
NODE_NODE_IF=kfold-n$NODE_INDEX
NODE_HOST_IP=10.250.$NODE_INDEX.1
NODE_NODE_IP=10.250.$NODE_INDEX.2
NODE_POD_CIDR=10.245.$NODE_INDEX.0/24
NODE_POD_GW=10.245.$NODE_INDEX.1
NODE_CGROUP=kfold-node$NODE_SUFFIX
