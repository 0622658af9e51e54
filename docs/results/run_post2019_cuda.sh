#!/bin/bash
# Issue 31's MNIST grid on a lent GPU (kirsch2019, b = 10, 30 steps, 3 seeds, results version 3 as
# kirsch2019/ on the same kind of machine): the seven strategies on MNIST and on Repeated-MNIST, and BALD
# with a last-layer Laplace posterior, three grids side by side sharing one GPU (7 + 7 + 3 runs at a
# time, one torch thread each). Resumable: rerun it and it skips what is done. GRID_TIMEOUT (seconds)
# stops the grids so that what they wrote can be packed; an interrupted run resumes from its last step.
#   bash docs/results/run_post2019_cuda.sh      (MNIST in $SKDBAL_DATA or ../shared/data)
# On 2026-11-26 (a lent H100, 16 cores) it ran with skorch 1.4.0 and laplace-torch 0.3 (and the latter's
# backpack, curvlinops, asdfghjkl, einconv, unfoldNd) installed from wheels, the CUDA MPS daemon on so that
# the 17 processes share the GPU without time-slicing, and GRID_TIMEOUT=505; all 45 runs took 196 s:
#   nvidia-cuda-mps-control -d; SKDBAL_DATA=.data GRID_TIMEOUT=505 bash docs/results/run_post2019_cuda.sh
cd "$(dirname "$0")/../.."
export SKDBAL_DATA="${SKDBAL_DATA:-../shared/data}" OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
PY="${PYTHON:-python3}"
S="bald,batch_bald,stochastic(bald,power,1),epig,badge,ddu,random"
run() { timeout "${GRID_TIMEOUT:-0}" "$PY" -m skdbal experiment --preset kirsch2019 --torch-threads 1 --quiet \
          --device cuda --set "mask_seeding='row'" --seeds 1 2 3 "$@"; }
run --strategies bald --laplace --n-jobs 3 --out docs/results/post2019_cuda_laplace > "${LOGS:-/tmp}/laplace.log" 2>&1 &
run --strategies "$S" --n-jobs 7 --out docs/results/post2019_cuda > "${LOGS:-/tmp}/mnist.log" 2>&1 &
run --dataset repeated_mnist --strategies "$S" --n-jobs 7 --out docs/results/post2019_cuda_repeated \
    > "${LOGS:-/tmp}/repeated.log" 2>&1 &
wait
