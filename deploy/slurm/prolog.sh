#!/bin/sh
# Slurm Prolog (slurm.conf: Prolog=/usr/lib/berth/prolog.sh): pre-pull, on each allocated node, the build of
# the job's --container-image that this node's CPU runs, so the first step starts without a registry round trip.
# pyxis exports the option to the job environment as SLURM_SPANK__SLURM_SPANK_OPTION_pyxis_container_image.
image=${SLURM_SPANK__SLURM_SPANK_OPTION_pyxis_container_image:-}
[ -n "$image" ] || exit 0
PYXIS_RUNTIME_PATH=${PYXIS_RUNTIME_PATH:-/run/pyxis} exec /usr/lib/berth/pyxis-importer get "docker://$image" >/dev/null
