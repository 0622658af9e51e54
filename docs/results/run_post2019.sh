#!/bin/bash
# Issue 31's MNIST grid (kirsch2019, b = 10, 30 steps, 3 seeds), on the CPU, one run at a time on one torch
# thread: the seven strategies, BALD with a last-layer Laplace posterior, then Repeated-MNIST. Resumable:
# rerun it and it skips what is done. Waits while another kirsch2019 grid is running.
#   bash docs/results/run_post2019.sh        (from the checkout; MNIST in $SKDBAL_DATA or ../shared/data)
cd "$(dirname "$0")/../.."
export SKDBAL_DATA="${SKDBAL_DATA:-../shared/data}" OMP_NUM_THREADS=1
PY="${PYTHON:-.venv/bin/python}"
while pgrep -f "skdbal experiment --preset kirsch2019" > /dev/null; do sleep 30; done
S="bald,batch_bald,stochastic(bald,power,1),epig,badge,ddu,random"
# results version 3 (torch's per-row generators), as the grid began: see docs/results/README.md
run() { "$PY" -m skdbal experiment --preset kirsch2019 --n-jobs 1 --torch-threads 1 --quiet \
          --set "mask_seeding='row'" "$@"; }
for seed in 1 2 3; do
  run --strategies "$S" --seeds $seed --out docs/results/post2019
  run --strategies bald --laplace --seeds $seed --out docs/results/post2019
done
for seed in 1 2 3; do
  run --dataset repeated_mnist --strategies "$S" --seeds $seed --out docs/results/post2019_repeated
done
