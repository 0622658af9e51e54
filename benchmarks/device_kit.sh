#!/usr/bin/env bash
# A one-call kit for issue 43's GPU checks on a lent device machine (tests/test_gpu.py and
# benchmarks/bench_gpu.py, skdbal against baal 2.1), which has no network: what it lacks travels.
#
#   bash benchmarks/device_kit.sh pack          # HERE, in the checkout the device tool sends (/work/main)
#   bash benchmarks/device_kit.sh run           # THERE, as the run tool's command (carry .whl and .devdata)
#   bash benchmarks/device_kit.sh run --dry     # the same steps on the CPU with tiny settings (a test, here)
#
# pack: downloads into .whl/ the wheels of what skdbal, skorch, baal and pytest import (cp312, manylinux
#   x86_64 where binary: the device's python3 is 3.12; KIT_PYTHON_VERSION to change), copies MNIST from
#   ../shared/data/mnist (KIT_MNIST_DIR) into .devdata/mnist/ (SKDBAL_DATA=.devdata finds it), records
#   the commit (.devdata/COMMIT) and the SHA-256 of every tracked file (.devdata/SHA256SUMS), ignores
#   /.whl/ and /.devdata/ in the repository's info/exclude (the common git dir: worktrees share it), and
#   fails if the kit is over 55 MiB (what travels, the tree included, must stay under 64 MiB). Run it
#   again after your last commit before a run: it keeps the wheels it has and records the commit anew.
# run [all|a|b] [--dry]: installs into /tmp/site (KIT_SITE) only the wheels whose top-level modules the
#   device's python3 cannot import, or whose version there is below setup.cfg's install_requires (never
#   torch, numpy or scipy: the image's stay); writes env.txt (nvidia-smi, versions, pip list); runs the
#   gpu tests (pytest_gpu.log), then bench_gpu.py (bench_gpu.log, bench_gpu.json, the commit in the
#   JSON's provenance through SKDBAL_COMMIT); all into $OUT (default /tmp/device_kit_out), each as it
#   goes (tee), so a killed command leaves what it had; a failing section does not stop the next; kit.log
#   is the whole console. `a` = the tests, Part A and skdbal's run; `b` = baal's run (files named _a, _b).
#   --dry (or KIT_DRY=1): --device cpu and the docstring's tiny settings; the gpu tests skip.
#
# Time on an H100, from docs/results/bench_gpu/bench_gpu.log (the last run there: row_pcg64 masks drawn
# on the host; its runs stopped at steps 92 and 88, at the limits it was given):
#   wheels ~5 s (3 there: skorch, baal, structlog), env.txt ~5 s, the 4 gpu tests ~45 s with a cold
#     torch+CUDA import (capped at KIT_TESTS_LIMIT, 150 s)
#   the bench's start (imports, provenance, CUDA's initialisation) ~20 s (21 s there), warm-up 1 s
#   Part A at T = 100 only (what the issue asks), --part-a-limit 45: one round of the 10 methods took
#     ~18-22 s there, so the fit, the warm-ups and best of 2 ~45-50 s (54 s at limit 50 there)
#   skdbal's run: the child's set-up 15 s (14.6 s there), not timed; steps 0-92 took 180 s (train 91.4,
#     query 80.9, eval 6.0), steps 93-100 ~8 x 2.7 s: ~203 s with row_pcg64. "auto" is row_philox on CUDA
#     now: the query (0.88 s a step, 0.75 s of it scoring 2,000 points at T = 100 at 2,655 img/s) should
#     fall to ~0.25-0.4 s a step, so ~140-155 s
#   baal's run: set-up ~5 s; steps 0-88 took 160.5 s, steps 89-100 at ~3.1 s a step (training grows)
#     ~37 s: ~200 s
#   sum: 5+5+45 + 20+1+50 + 15+(140..203) + 5+200 = ~490 s expected, ~550 s if row_philox saves nothing.
#   So it all fits one call of timeout_s 600. `run` stops at KIT_DEADLINE (575 s) after its start: the
#   bench gets --budget = what is left less 5 s and is interrupted (SIGINT, then KILL 10 s on) at the
#   deadline; --baal-reserve 215 keeps baal's ~200 s free when skdbal's run starts (so if the estimate is
#   wrong, skdbal's run is the one stopped, PARTIAL); the runs' own limits (260 s) are above the worst
#   estimates. What is not done by then is reported PARTIAL, nothing extrapolated.
#   Device time: a start (1-2 min) + one call (<= 600 s) leaves >= 3 min of the 15: too little for a
#   fresh machine (4 min), so there is one try. The split, `run a` (~300 s: tests, Part A, skdbal's run)
#   then `run b` (~230 s: baal's run), is the fallback for a session that would rather have two shorter
#   calls: the second within the machine's 30 s warm time, or a fresh machine's baal loop is timed on
#   another machine than skdbal's run (say so in the results).
#
# The run tool's call (from /work/main, after pack there):
#   command: bash benchmarks/device_kit.sh run     carry: [".whl", ".devdata"]     timeout_s: 600
# Copy the returned files into docs/results/bench_gpu/ (benchmarks/README.md, "A GPU machine: issue 43's
# checks in one call").
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 2
KIT_LIMIT_MIB=55
# what the device's python3 may lack: skdbal's install_requires (setup.cfg) and what they import at run
# time (skorch: tabulate, tqdm; scikit-learn: joblib, threadpoolctl, narwhals; joblib: cloudpickle), baal
# 2.1.0 and what bench_gpu's import_baal and its modules import (structlog, PIL; torchmetrics gets a
# stand-in), and pytest with its needs: each wheel's Requires-Dist, less extras and other platforms. The
# versions are those of the development venv (baal's pin is the issue's; structlog 26.1 ran with it on
# the last H100 run, though baal declares <23). One version of each: two stop the install.
WHEELS=(skorch==1.4.0 scikit-learn==1.9.1 joblib==1.6.0 threadpoolctl==3.8.0 narwhals==2.29.0 cloudpickle==3.1.3
        tqdm==4.70.1 tabulate==0.10.0 baal==2.1.0 structlog==26.1.0 pillow==13.0.0
        pytest==9.2.0 pluggy==1.7.0 iniconfig==2.3.1 packaging==26.4 pygments==2.21.0)

die() { echo "device_kit: $*" >&2; exit 1; }

pack() {
    local py="${KIT_PIP_PYTHON:-}" pyver="${KIT_PYTHON_VERSION:-3.12}"
    if [ -z "$py" ]; then
        for py in "$ROOT/.venv/bin/python" /work/main/.venv/bin/python python3; do
            command -v "$py" >/dev/null && break
        done
    fi
    local common exclude
    common="$(git rev-parse --path-format=absolute --git-common-dir 2>/dev/null)" || die "not in a git checkout"
    exclude="$common/info/exclude"
    mkdir -p "$common/info"
    for pat in /.whl/ /.devdata/; do
        grep -qxF "$pat" "$exclude" 2>/dev/null || echo "$pat" >>"$exclude"
    done
    echo "ignored in $exclude: /.whl/ /.devdata/"

    mkdir -p .whl
    local plat=() n
    for n in 2_28 2_27 2_17; do plat+=(--platform "manylinux_${n}_x86_64"); done
    plat+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)
    echo "downloading ${#WHEELS[@]} wheels for CPython $pyver, x86_64 (with $py)"
    "$py" -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" --implementation cp \
        "${plat[@]}" -d .whl "${WHEELS[@]}" 2>&1 | grep -v "^WARNING: Location 'file:"
    [ "${PIPESTATUS[0]}" = 0 ] || die "pip download failed"
    for f in .whl/*.whl; do  # an earlier pack's for another Python: one version of each
        case "$f" in *-py3-none-any.whl|*-py2.py3-none-any.whl|*-cp${pyver/./}-*manylinux*x86_64*.whl) ;;
            *) echo "  removed $f (not for CPython $pyver on x86_64)"; rm -f "$f";; esac
    done
    # keep only the wheels named above (an older pack's or another version would stop the install)
    "$py" - "${WHEELS[@]}" <<'EOF' || die "the wheels in .whl/ do not match the list"
import re, sys
from pathlib import Path
norm = lambda s: re.sub(r"[-_.]+", "_", s).lower()
want = {norm(n.split("==")[0]): v for n, v in (w.split("==") for w in sys.argv[1:])}
found = {}
for whl in sorted(Path(".whl").glob("*.whl")):
    name, version = whl.name.split("-")[:2]
    if want.get(norm(name)) != version:
        print(f"  removed {whl.name} (not in the kit's list)")
        whl.unlink()
    else:
        found[norm(name)] = whl.name
missing = sorted(set(want) - set(found))
sys.exit(f"missing wheels: {missing}" if missing else 0)
EOF

    local src="${KIT_MNIST_DIR:-$ROOT/../shared/data/mnist}"
    mkdir -p .devdata/mnist
    for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
        [ -f "$src/$f" ] || die "MNIST file $src/$f not found (KIT_MNIST_DIR names the folder)"
        cmp -s "$src/$f" ".devdata/mnist/$f" || cp "$src/$f" ".devdata/mnist/$f"
    done

    # the commit, and every tracked file's hash: the device's copy has no .git, and `run` checks that
    # the tree it got is the one packed (a commit or an edit after pack shows there)
    local commit
    commit="$(git rev-parse HEAD)" || die "no commit"
    [ -z "$(git status --porcelain --untracked-files=no)" ] || commit="$commit+dirty"
    echo "$commit" >.devdata/COMMIT
    git ls-files -z | xargs -0 sha256sum -- >.devdata/SHA256SUMS 2>/dev/null
    echo "commit $commit (.devdata/COMMIT); $(wc -l <.devdata/SHA256SUMS) tracked files hashed"

    local kit tree
    kit=$(du -sb .whl .devdata | awk '{s += $1} END {print s}')
    tree=$( { git ls-files -z; git ls-files -z -o --exclude-standard; } | xargs -0 du -cb -- 2>/dev/null \
            | awk '$2 == "total" {s += $1} END {print s}')
    ls -l .whl
    du -sb .whl .devdata | awk -v kit="$kit" -v tree="$tree" '{m[$2] = $1 / 1048576} END {
        printf "kit: %.1f MiB (.whl %.1f, .devdata %.1f); with the tree that travels: %.1f MiB of 64\n",
            kit / 1048576, m[".whl"], m[".devdata"], (kit + tree) / 1048576}'
    [ "$kit" -le $((KIT_LIMIT_MIB * 1048576)) ] || die "the kit is over $KIT_LIMIT_MIB MiB"
    [ $((kit + tree)) -le $((62 * 1048576)) ] || die "the kit and the tree are over 62 MiB (64 travel)"
    echo "packed. The run tool's call: command 'bash benchmarks/device_kit.sh run', carry [\".whl\", \".devdata\"], timeout_s 600"
}

# ---------------------------------------------------------------------------------------- run
elapsed() { echo $(( $(date +%s) - T0 )); }

install_wheels() {
    local site="$1"
    # which wheels' top-level modules python3 cannot import as it is (without the kit's site folder), or
    # whose installed version is below what setup.cfg's install_requires asks
    local need
    need=$(PYTHONPATH= python3 - <<'EOF'
import configparser, importlib.metadata as md, importlib.util, re, sys, zipfile
from pathlib import Path
NEVER = {"torch", "numpy", "scipy", "triton"}  # the image's builds stay, whatever a wheel brings
norm = lambda s: re.sub(r"[-_.]+", "-", s).lower()
release = lambda v: tuple(int(x) for x in re.findall(r"\d+", v.split("+")[0])[:3])
cfg = configparser.ConfigParser()
cfg.read("setup.cfg")
minimum = {norm(m[1]): m[2] for m in re.finditer(r"^\s*([A-Za-z0-9_.-]+)\s*>=\s*([0-9.]+)",
                                                 cfg.get("options", "install_requires", fallback=""), re.M)}


def found(name):
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


for whl in sorted(Path(".whl").glob("*.whl")):
    dist = norm(whl.name.split("-")[0])
    with zipfile.ZipFile(whl) as z:
        names = z.namelist()
        top = next((n for n in names if n.endswith(".dist-info/top_level.txt")), None)
        mods = z.read(top).decode().split() if top else sorted({
            n.split("/")[0].removesuffix(".py") for n in names
            if not n.split("/")[0].endswith((".dist-info", ".data"))})
    # importable names only (not scikit_learn.libs, the vendored libraries' folder), none private
    mods = [m for m in mods if m.isidentifier() and not m.startswith("_")] or mods
    if NEVER & set(mods):
        print(f"  {whl.name}: never installed over the image's {sorted(NEVER & set(mods))}", file=sys.stderr)
        continue
    missing = [m for m in mods if not found(m)]
    try:
        have = md.version(dist)
    except md.PackageNotFoundError:
        have = None
    old = not missing and have and dist in minimum and release(have) < release(minimum[dist])
    why = (f"install (no {', '.join(missing)})" if missing else
           f"install (the image's {have} is below {minimum[dist]})" if old else
           f"already importable ({have or 'version unknown'})")
    print(f"  {whl.name}: {why}", file=sys.stderr)
    if missing or old:
        print(whl)
EOF
    ) || { echo "!!! could not read the wheels"; return 1; }
    mkdir -p "$site"
    if [ -n "$need" ]; then
        # shellcheck disable=SC2086
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" $need \
            || { echo "!!! pip install into $site failed"; return 1; }
    fi
    echo "installed into $site: $(echo $need | wc -w) wheels"
}

run() {
    local part="all" dry=0 arg
    for arg in "$@"; do
        case "$arg" in
            all|a|b) part="$arg";;
            --dry) dry=1;;
            *) die "run takes [all|a|b] [--dry], not '$arg'";;
        esac
    done
    [ "${KIT_DRY:-0}" = 1 ] && dry=1
    T0=$(date +%s)
    OUT="${OUT:-/tmp/device_kit_out}"
    case "$OUT" in /*) ;; *) OUT="$PWD/$OUT";; esac   # absolute: a relative one would land in the checkout
    mkdir -p "$OUT"
    [ "$part" = all ] && sfx_old="" || sfx_old="_$part"
    rm -f "$OUT/env$sfx_old.txt" "$OUT/pytest_gpu$sfx_old.log" "$OUT/bench_gpu$sfx_old.log" \
        "$OUT/bench_gpu$sfx_old.json" "$OUT/kit$sfx_old.log"   # an earlier run's files are not this one's
    local deadline="${KIT_DEADLINE:-575}" sfx="" failed=()
    [ "$part" = all ] || sfx="_$part"
    main() {
        echo "device_kit run $part$([ $dry = 1 ] && echo ' --dry') in $ROOT at $(date -u +%FT%TZ), OUT=$OUT, deadline ${deadline} s"
        [ -d .whl ] && [ -d .devdata/mnist ] || echo "!!! .whl or .devdata/mnist missing: was the call's carry [\".whl\", \".devdata\"]?"

        echo "=== wheels (at $(elapsed) s)"
        local site="${KIT_SITE:-/tmp/site}"
        install_wheels "$site" || failed+=(wheels)
        export PYTHONPATH="$site:$ROOT" SKDBAL_DATA="$ROOT/.devdata" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1

        # the commit: .devdata/COMMIT, from pack; +changed-after-pack if the tree is not the packed one
        local commit="not recorded"
        if [ -f .devdata/COMMIT ]; then
            commit="$(cat .devdata/COMMIT)"
            local changed
            changed=$(sha256sum --quiet -c .devdata/SHA256SUMS 2>/dev/null | grep -v '^sha256sum:' | head -20)
            if [ -n "$changed" ]; then
                commit="$commit+changed-after-pack"
                echo "!!! the tree differs from the one packed (run pack again after the last commit):"
                echo "$changed"
            fi
        fi
        export SKDBAL_COMMIT="$commit"
        echo "commit: $SKDBAL_COMMIT"

        echo "=== environment (at $(elapsed) s) -> env$sfx.txt"
        {
            echo "commit: $SKDBAL_COMMIT"; echo "date: $(date -u +%FT%TZ)"; uname -a
            echo "--- nvidia-smi"; timeout 30 nvidia-smi 2>&1 || echo "(no nvidia-smi)"
            echo "--- python3"; command -v python3
            timeout 120 python3 -c "
import platform, torch, numpy, scipy, sklearn, skorch, skdbal
print('python', platform.python_version(), '| torch', torch.__version__, '| CUDA', torch.version.cuda,
      '| cuda available', torch.cuda.is_available(),
      '|', torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')
for m in (numpy, scipy, sklearn, skorch):
    print(m.__name__, m.__version__, m.__file__)
print('skdbal', skdbal.__version__, skdbal.__file__)
" 2>&1
            echo "--- pip list (with $site)"; timeout 60 python3 -m pip list --format=freeze 2>&1
            echo "--- pip check (a kit wheel beside an older package of the image shows here)"
            timeout 60 python3 -m pip check 2>&1
        } >"$OUT/env$sfx.txt" 2>&1
        sed -n '1,3p;/^--- python3/,/^--- pip/p' "$OUT/env$sfx.txt"

        if [ "$part" != b ]; then
            echo "=== gpu tests (at $(elapsed) s) -> pytest_gpu$sfx.log"
            timeout -k 10 "${KIT_TESTS_LIMIT:-150}" python3 -m pytest -m gpu tests/test_gpu.py -p no:cacheprovider \
                -q -rs --durations=5 2>&1 | tee "$OUT/pytest_gpu$sfx.log"
            local rc=${PIPESTATUS[0]}
            [ "$rc" = 0 ] || failed+=("tests (rc $rc)")
        fi

        local left budget
        left=$((deadline - $(elapsed)))
        budget=$((left - 5))
        if [ "$left" -lt 30 ]; then   # timeout 0 would mean no limit at all
            failed+=("bench (only $left s left before the deadline: not started)")
            left=0
        fi
        echo "=== bench_gpu.py (at $(elapsed) s, budget $budget s) -> bench_gpu$sfx.log, bench_gpu$sfx.json"
        local bench=(--json "$OUT/bench_gpu$sfx.json" --budget "$budget")
        if [ $dry = 1 ]; then  # the docstring's tiny settings for a CPU test
            bench+=(--device cpu --n 500 --T 20 --repeats 1 --steps 2 --epochs 2 --run-T 10 --pool-subsample 200)
        else  # the header's arithmetic: T = 100 only, whole 100-step runs
            bench+=(--device cuda --T 100 --repeats 3 --part-a-limit 45 --skdbal-time-limit 260 --baal-reserve 215
                    --baal-time-limit 260)
        fi
        case "$part" in a) bench+=(--skip baal --baal-reserve 0);; b) bench+=(--skip scoring skdbal);; esac
        if [ "$left" -gt 0 ]; then
            echo "python3 benchmarks/bench_gpu.py ${bench[*]}"
            timeout -k 10 -s INT "$left" python3 benchmarks/bench_gpu.py "${bench[@]}" 2>&1 \
                | tee "$OUT/bench_gpu$sfx.log"
            rc=${PIPESTATUS[0]}
            [ "$rc" = 0 ] || failed+=("bench (rc $rc)")
            grep -q '"errors": \[\]' "$OUT/bench_gpu$sfx.json" 2>/dev/null \
                || failed+=("bench sections (see the JSON's errors)")
        fi

        echo "=== done in $(elapsed) s; in $OUT:"
        ls -l "$OUT"
        if [ ${#failed[@]} -gt 0 ]; then
            echo "FAILED: ${failed[*]}"
            return 1
        fi
        echo "all sections ran"
    }
    main 2>&1 | tee "$OUT/kit$sfx.log"
    return "${PIPESTATUS[0]}"
}

case "${1:-}" in
    pack) shift; pack "$@";;
    run) shift; run "$@";;
    *) echo "usage: bash benchmarks/device_kit.sh pack | run [all|a|b] [--dry]" >&2; exit 2;;
esac
