"""Run every client scenario of the pinned MCP conformance suites against BooCode, a few at a time.

``make conformance`` installs this folder's package.json with ``npm ci`` (a local Node 22 and
``@modelcontextprotocol/conformance`` twice, under the aliases ``conformance-0-1`` and
``conformance-0-2``), then runs this script with the project's Python::

    .venv/bin/python tests/conformance/run.py [--timeout 60] [--only 'auth/*'] [--suite 0.1.16] [--jobs 3]

What runs, as each suite's own ``list`` command reports it:

* 0.1.16: every client scenario, at the wire version the suite picks for it.
* 0.2.0 alphas: every client scenario of each requirement set (``list --client --requirements
  REV``), at that revision's wire version, as ``client --requirements REV`` would run it; the
  scored ones are *required*, the set's ``not_scored`` ones (extensions, added after release)
  are run and reported only. Client scenarios in no set run once at their default wire, not
  required either.

Each scenario is a separate ``conformance client --scenario`` run with a timeout; the suite
runs ``manage.py mcp_conformance_client URL`` on a throw-away ``BOOCODE_DATA_DIR`` of its own,
which starts with a copy of a database migrated once for the whole run.
``--jobs N`` runs (default 3) go at once: the suite's mock servers listen on ports the system
picks (``listen(0)``), the command listens on none, and every run has its own data folder and
results folder, so runs share nothing. The scenarios that time the client (``sse-retry``) run
after the others, one at a time; one whose only trouble is that the client reconnected late
(a busy machine's scheduling, never too early) runs once more, and says so. A line is printed
as each run ends; the table is in plan
order whatever the order they ended in. The suite's output goes to ``results/``
(git-ignored): one folder per run, plus ``summary.json`` and ``summary.md``. A table (scenario,
suite, wire, pass/fail, one-line reason) and totals are printed. Exit status 1 when a required
scenario failed, unless it is one of the documented ``EXPECTED_FAILURES`` (then 1 when it
passes: the list must stay true). Interrupted (Ctrl-C, SIGTERM), it kills the runs under way,
each with its mock servers and client.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
NODE = HERE / "node_modules" / "node" / "bin" / "node"
RESULTS = HERE / "results"
# package.json aliases of @modelcontextprotocol/conformance, oldest first.
SUITE_ALIASES = ("conformance-0-1", "conformance-0-2")
DEFAULT_WIRE = "default"  # no --spec-version: the suite picks the scenario's own wire version
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# The runner's own margin over the suite's client timeout (mock servers start and stop).
SUITE_MARGIN_SECONDS = 30
DEFAULT_JOBS = 3  # runs at once: each is a Node suite, mock servers and a Python client
# Scenarios whose checks time the client (SEP-1699: it must wait the server's `retry` before
# reconnecting, within 50 ms early and 200 ms late), and those checks: they run last, alone.
TIMED_SCENARIOS = frozenset({"sse-retry"})
TIMING_CHECKS = frozenset({"client-sse-retry-timing"})
# Required runs BooCode fails on purpose, (suite version, scenario) -> why (docs/conformance.md).
# They do not fail the run; one that starts passing does, so that this list stays true.
EXPECTED_FAILURES = {
    ("0.1.16", "auth/2025-03-26-oauth-metadata-backcompat"): (
        "the mock's metadata at the origin's well-known URL names another issuer; RFC 8414 §3.3 "
        "and SEP-2468 require refusing it (0.2's version of the scenario names the origin and passes)"
    ),
}


@dataclass(frozen=True)
class Suite:
    """One installed version of the conformance package."""

    alias: str
    version: str
    entry: Path

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """``conformance ARGS`` under the local Node 22."""
        return subprocess.run(
            [str(NODE), str(self.entry), *args], capture_output=True, text=True, timeout=timeout, cwd=HERE
        )


@dataclass(frozen=True)
class Planned:
    """One scenario to run: at which wire version, and whether it counts."""

    suite: Suite
    scenario: str
    wire: str = DEFAULT_WIRE
    required: bool = True
    note: str = ""  # why it is not required


@dataclass
class Outcome:
    """The result of one run."""

    scenario: str
    suite: str
    wire: str
    required: bool
    passed: bool
    reason: str
    seconds: float
    note: str = ""
    failed_checks: list[str] = field(default_factory=list)
    folder: str = ""
    expected_failure: str = ""  # why this required run is allowed to fail (EXPECTED_FAILURES)

    @property
    def verdict(self) -> str:
        """pass, FAIL, xfail (an expected failure) or XPASS (an expected failure that passed)."""
        if self.expected_failure:
            return "XPASS" if self.passed else "xfail"
        return "pass" if self.passed else "FAIL"

    @property
    def fails_run(self) -> bool:
        """True when this outcome makes the whole run fail."""
        return self.required and (self.passed if self.expected_failure else not self.passed)


def installed_suites() -> list[Suite]:
    """The conformance packages ``npm ci`` put in node_modules, with their versions."""
    if not NODE.exists():
        sys.exit(f"{NODE} is missing: run `make conformance` (npm ci in {HERE.relative_to(ROOT)}) first")
    suites = []
    for alias in SUITE_ALIASES:
        package = HERE / "node_modules" / alias
        try:
            manifest = json.loads((package / "package.json").read_text())
        except FileNotFoundError:
            sys.exit(f"{package} is missing: run `make conformance` first")
        suites.append(Suite(alias, manifest["version"], package / manifest["bin"]["conformance"]))
    return suites


def list_client_scenarios(suite: Suite) -> list[str]:
    """``conformance list --client``: the names, in the suite's order."""
    done = suite.run("list", "--client")
    names = re.findall(r"^\s+- (\S+)(?: \[.*\])?$", done.stdout, flags=re.MULTILINE)
    if done.returncode != 0 or not names:
        sys.exit(f"conformance {suite.version} list --client failed:\n{done.stdout}{done.stderr}")
    return names


def requirement_revisions(suite: Suite) -> list[str]:
    """The revisions ``list --requirements`` accepts (none before 0.2), from ``list --help``."""
    help_text = " ".join(suite.run("list", "--help").stdout.split())
    found = re.search(r"Requirement sets available: ([0-9, -]+)", help_text)
    return [rev.strip() for rev in found.group(1).split(",") if rev.strip()] if found else []


def requirement_set(suite: Suite, revision: str) -> tuple[list[str], list[tuple[str, str]]]:
    """(scored client scenarios, [(not-scored client scenario, reason)]) of one revision."""
    done = suite.run("list", "--client", "--requirements", revision)
    if done.returncode != 0:
        sys.exit(f"conformance {suite.version} list --requirements {revision} failed:\n{done.stderr}")
    scored: list[str] = []
    not_scored: list[tuple[str, str]] = []
    section, reason = "", ""
    for line in done.stdout.splitlines():
        if line.startswith("Client scenarios"):
            section = "client"
        elif line.startswith(("Server scenarios", "Authorization")):
            section = "other"
        elif line.startswith("Run and reported, but never scored"):
            section = "not_scored"
        elif section == "client" and (m := re.match(r"^\s+- (\S+)$", line)):
            scored.append(m.group(1))
        elif section == "not_scored" and (m := re.match(r"^\s{2}(\S[^(]*?) \(\d+\):$", line)):
            reason = m.group(1)
        elif section == "not_scored" and (m := re.match(r"^\s+- (\S+) \[client\]$", line)):
            not_scored.append((m.group(1), reason))
    return scored, not_scored


def plan(suite: Suite) -> list[Planned]:
    """Every client scenario of ``suite``, at each wire version it is required at."""
    listed = list_client_scenarios(suite)
    revisions = requirement_revisions(suite)
    if not revisions:
        return [Planned(suite, name) for name in listed]
    planned: list[Planned] = []
    covered: set[str] = set()
    for revision in revisions:
        scored, not_scored = requirement_set(suite, revision)
        planned += [Planned(suite, name, revision) for name in scored]
        planned += [Planned(suite, name, revision, False, f"not scored: {why}") for name, why in not_scored]
        covered.update(scored, (name for name, _ in not_scored))
    planned += [
        Planned(suite, name, DEFAULT_WIRE, False, "in no requirement set")
        for name in listed
        if name not in covered
    ]
    return planned


def client_command(python: str) -> str:
    """The command the suite runs (it splits on spaces and appends the server URL)."""
    parts = [python, str(ROOT / "manage.py"), "mcp_conformance_client"]
    if any(" " in part for part in parts):
        sys.exit(f"the suite splits the client command on spaces; these paths contain one: {parts}")
    return " ".join(parts)


def slug(text: str) -> str:
    """A folder name for a scenario (auth/x has a slash)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)


def first_line(text: str) -> str:
    """The first non-empty line, without colours."""
    return next((ln.strip() for ln in ANSI.sub("", text).splitlines() if ln.strip()), "")


def client_error(folder: Path) -> str:
    """The one line the command printed on failure (``CommandError: ...``), if any."""
    for path in sorted(folder.rglob("stderr.txt")):
        lines = [ln.strip() for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
        for line in reversed(lines):
            if line.startswith("CommandError: "):
                return line.removeprefix("CommandError: ")
        if lines:
            return lines[-1]
    return ""


def explain(folder: Path, log: str, returncode: int, passed: bool) -> tuple[str, list[str]]:
    """A one-line reason, and the ids of the failed checks.

    For a failed run: the first failed (or warned) check and what the client said. A passed
    run gets a reason only when it proves little: no check succeeded (all skipped), or the
    scenario tolerated a client that failed.
    """
    checks: list[dict[str, object]] = []
    for path in sorted(folder.rglob("checks.json")):
        checks += json.loads(path.read_text())
    bad = [c for c in checks if c.get("status") == "FAILURE"]
    warned = [c for c in checks if c.get("status") == "WARNING"]
    skipped = [c for c in checks if c.get("status") == "SKIPPED"]
    parts = []
    if bad:
        first = bad[0]
        message = first_line(str(first.get("errorMessage") or first.get("description") or ""))
        more = f" (+{len(bad) - 1} more failed checks)" if len(bad) > 1 else ""
        parts.append(f"{first.get('id')}: {message}{more}")
    elif warned:
        first = warned[0]
        parts.append(f"warning {first.get('id')}: {first_line(str(first.get('errorMessage') or ''))}")
    elif passed and not any(c.get("status") == "SUCCESS" for c in checks):
        why = f": {first_line(str(skipped[0].get('description') or ''))}" if skipped else ""
        parts.append(f"vacuous: no check succeeded ({len(skipped)} skipped{why})")
    if "CLIENT TIMED OUT" in log or "Client timed out after" in log:
        parts.append("the client timed out")
    error = client_error(folder)
    if error and "Client exited with code" in log:
        parts.append(f"client: {error}")
    if not parts and not passed:
        parts.append(f"suite exited {returncode}: {first_line(log[-2000:])}")
    return " | ".join(parts), [str(c.get("id")) for c in bad]


class Running:
    """The suite processes under way (one per run), so that an interrupted run kills them all."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._processes: set[subprocess.Popen[str]] = set()
        self.stopping = False

    def add(self, process: subprocess.Popen[str]) -> None:
        """Track ``process``; killed at once if the run is already stopping."""
        with self._lock:
            self._processes.add(process)
            stopping = self.stopping
        if stopping:
            _kill(process)

    def discard(self, process: subprocess.Popen[str]) -> None:
        """Stop tracking ``process`` (it has ended)."""
        with self._lock:
            self._processes.discard(process)

    def kill_all(self) -> None:
        """Kill every run under way, and any that starts from now on."""
        with self._lock:
            self.stopping = True
            processes = list(self._processes)
        for process in processes:
            _kill(process)


def _kill(process: subprocess.Popen[str]) -> None:
    """SIGKILL the run's session: the suite, its mock servers and the client."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # start_new_session: pgid == pid


def result_folder(item: Planned) -> Path:
    """Where the suite writes ``item``'s output (results/VERSION/WIRE/SCENARIO)."""
    return RESULTS / item.suite.version / item.wire / slug(item.scenario)


SQLITE = "boocode.sqlite3"  # the database in a data folder (BOOCODE_DATA_DIR), unless one is configured


def migrated_template(data_root: Path) -> Path | None:
    """A data folder with a migrated SQLite database, made once: each run starts from a copy.

    The command migrates its database first (tokens go to the product's store); on a copy of a
    migrated one that finds nothing to do, where a new database costs seconds of CPU a run.
    ``None`` when a database server is configured (BOOCODE_DATABASE_URL): nothing to copy.
    """
    if os.environ.get("BOOCODE_DATABASE_URL"):
        return None
    template = data_root / "template"
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "migrate", "-v0"],
        cwd=ROOT,
        env={**_base_env(), "BOOCODE_DATA_DIR": str(template)},
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        sys.exit(f"manage.py migrate failed in {template}:\n{done.stdout}{done.stderr}")
    return template


def run_one(
    item: Planned, command: str, timeout: int, data_root: Path, running: Running, template: Path | None = None
) -> Outcome:
    """One ``conformance client --scenario`` run; its output goes to results/.

    Its data folder starts with a copy of ``template``'s database, if given.
    """
    folder = result_folder(item)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    args = [
        "client",
        "--command",
        command,
        "--scenario",
        item.scenario,
        "--timeout",
        str(timeout * 1000),
        "-o",
        str(folder),
    ]
    if item.wire != DEFAULT_WIRE:
        # What `client --requirements REV` does for each scenario of the set.
        args += ["--spec-version", item.wire, "--force"]
    env_dir = Path(tempfile.mkdtemp(prefix="run-", dir=data_root))
    if template is not None:
        shutil.copyfile(template / SQLITE, env_dir / SQLITE)
    started = time.monotonic()
    # A session of its own, so that a hung run is killed with its mock servers and client.
    process = subprocess.Popen(
        [str(NODE), str(item.suite.entry), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
        start_new_session=True,
        # A data folder of its own: the command never touches data/.
        env={
            **_base_env(),
            "BOOCODE_DATA_DIR": str(env_dir),
            "BOOCODE_PUBLIC_URL": PUBLIC_URL,
            "BOOCODE_CLIENT_METADATA_URL": CLIENT_METADATA_URL,
            # The suite's authorization servers listen on other ports of this machine than the
            # MCP server it declares: local addresses are allowed, as an administrator would.
            "BOOCODE_EGRESS_ALLOW": "127.0.0.0/8 ::1 localhost",
        },
    )
    running.add(process)
    try:
        log, _ = process.communicate(timeout=timeout + SUITE_MARGIN_SECONDS)
        returncode = process.returncode
    except subprocess.TimeoutExpired:
        _kill(process)
        log, _ = process.communicate()
        returncode = -1
    finally:
        running.discard(process)
        shutil.rmtree(env_dir, ignore_errors=True)
    seconds = time.monotonic() - started
    (folder / "suite.log").write_text(ANSI.sub("", log))
    passed = returncode == 0 and "SKIPPED:" not in log
    reason, failed = explain(folder, log, returncode, passed)
    if returncode == -1:
        reason = f"the suite did not finish within {timeout + SUITE_MARGIN_SECONDS} s | {reason}"
    expected = EXPECTED_FAILURES.get((item.suite.version, item.scenario), "") if item.required else ""
    if expected and passed:
        reason = f"passes now: remove it from EXPECTED_FAILURES in {Path(__file__).name} and the docs"
    elif expected:
        reason = f"expected: {expected} | {reason}"
    return Outcome(
        item.scenario,
        item.suite.version,
        item.wire,
        item.required,
        passed,
        reason,
        round(seconds, 1),
        item.note,
        failed,
        str(folder.relative_to(ROOT)),
        expected,
    )


# BooCode as if served over HTTPS at the suite's example client's host, its Client ID Metadata
# Document published where the suite's reference client has it (auth/basic-cimd checks the URL).
PUBLIC_URL = "https://conformance-test.local"
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


def _base_env() -> dict[str, str]:
    """This process's environment, without conformance variables a caller may have exported."""
    return {k: v for k, v in os.environ.items() if not k.startswith("MCP_CONFORMANCE_")}


def markdown(outcomes: list[Outcome]) -> str:
    """The summary as a Markdown table (docs/conformance.md keeps a copy as the baseline)."""
    rows = ["| Scenario | Suite | Wire | Required | Result | Reason |", "|---|---|---|---|---|---|"]
    for o in outcomes:
        required = "yes" if o.required else f"no ({o.note})"
        reason = o.reason.replace("|", "\\|")
        rows.append(f"| {o.scenario} | {o.suite} | {o.wire} | {required} | {o.verdict} | {reason} |")
    return "\n".join(rows) + "\n"


def print_table(outcomes: list[Outcome]) -> None:
    """The summary table on stdout, then totals per suite."""
    width = max(len(o.scenario) for o in outcomes)
    print(f"\n{'scenario':<{width}}  {'suite':<15} {'wire':<10} {'req':<3}  result  reason")
    for o in outcomes:
        reason = o.reason if len(o.reason) <= 160 else o.reason[:157] + "..."
        print(
            f"{o.scenario:<{width}}  {o.suite:<15} {o.wire:<10} {'yes' if o.required else 'no':<3}  "
            f"{o.verdict:<6}  {reason}"
        )
    print()
    for version in dict.fromkeys(o.suite for o in outcomes):
        mine = [o for o in outcomes if o.suite == version]
        required = [o for o in mine if o.required]
        other = [o for o in mine if not o.required]
        xfail = sum(o.verdict == "xfail" for o in required)
        print(
            f"{version}: required {sum(o.passed for o in required)}/{len(required)} passed"
            + (f" ({xfail} expected failure{'s' if xfail > 1 else ''})" if xfail else "")
            + f"; not required {sum(o.passed for o in other)}/{len(other)} passed"
        )
    required = [o for o in outcomes if o.required]
    print(
        f"total: {sum(o.passed for o in required)}/{len(required)} required runs passed, "
        f"{sum(o.passed for o in outcomes)}/{len(outcomes)} runs passed, "
        f"{sum(o.seconds for o in outcomes):.0f} s; "
        f"{sum(o.fails_run for o in outcomes)} unexpected result(s)"
    )


def late_only(folder: Path) -> str:
    """The timing check's words when a timed scenario's only trouble is that the client came
    late (a busy machine's scheduling); "" otherwise (too early is the client's fault)."""
    checks: list[dict[str, object]] = []
    for path in sorted(folder.rglob("checks.json")):
        checks += json.loads(path.read_text())
    troubles = [c for c in checks if c.get("status") in ("FAILURE", "WARNING")]
    if len(troubles) != 1 or troubles[0].get("id") not in TIMING_CHECKS:
        return ""
    details = troubles[0].get("details")
    if not isinstance(details, dict) or details.get("tooEarly") or not details.get("slightlyLate"):
        return ""
    return first_line(str(troubles[0].get("errorMessage") or ""))


def run_all(planned: list[Planned], command: str, timeout: int, jobs: int) -> list[Outcome]:
    """Run ``planned``, ``jobs`` at a time; a line as each ends; the outcomes in plan order.

    The scenarios that time the client (:data:`TIMED_SCENARIOS`) run last, one at a time, so
    that the others do not load the machine under them; one that only came late (not early)
    runs once more, and its outcome says so.
    """
    data_root = Path(tempfile.mkdtemp(prefix="conformance-"))
    running = Running()
    outcomes: dict[int, Outcome] = {}
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="scenario")

    def report(index: int, outcome: Outcome) -> None:
        outcomes[index] = outcome
        item = planned[index]
        print(
            f"[{len(outcomes)}/{len(planned)}] {item.suite.version} {item.wire} {item.scenario}: "
            f"{outcome.verdict} ({outcome.seconds:.1f} s)",
            flush=True,
        )

    try:
        template = migrated_template(data_root)
        timed = [index for index, item in enumerate(planned) if item.scenario in TIMED_SCENARIOS]
        pending: dict[Future[Outcome], int] = {
            pool.submit(run_one, item, command, timeout, data_root, running, template): index
            for index, item in enumerate(planned)
            if index not in timed
        }
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                index = pending.pop(future)
                report(index, future.result())
        for index in timed:
            outcome = run_one(planned[index], command, timeout, data_root, running, template)
            late = "" if outcome.passed else late_only(ROOT / outcome.folder)
            if late:
                print(f"  {planned[index].scenario}: only late ({late}); once more", flush=True)
                outcome = run_one(planned[index], command, timeout, data_root, running, template)
                first = f"second try (the first came late: {late})"
                outcome.reason = " | ".join(filter(None, [first, outcome.reason]))
            report(index, outcome)
    except BaseException:
        running.kill_all()  # Ctrl-C or a bug: no run may outlive this process
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(data_root, ignore_errors=True)
    return [outcomes[index] for index in range(len(planned))]


def _exit_on_signal(signum: int, frame: object) -> None:
    """SIGTERM ends the run as Ctrl-C does: ``run_all`` kills the runs under way on the way out."""
    sys.exit(128 + signum)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=int, default=60, help="seconds per scenario for the client")
    parser.add_argument("--only", default="*", help="run the scenarios matching this glob")
    parser.add_argument("--suite", default="", help="run one suite version only (e.g. 0.1.16)")
    parser.add_argument(
        "--jobs", type=int, default=DEFAULT_JOBS, help=f"scenarios run at once (default {DEFAULT_JOBS})"
    )
    options = parser.parse_args()
    if options.jobs < 1:
        parser.error("--jobs must be 1 or more")
    signal.signal(signal.SIGTERM, _exit_on_signal)

    # The client runs ~100 times: each a child of one zygote that imported the SDK and Django
    # once (tests/support/zygote.py), through its launcher; the real interpreter until it listens.
    sys.path.insert(0, str(ROOT))
    from tests.support import zygote
    from tests.support.processes import launcher_in

    launchers = tempfile.mkdtemp(prefix="boocode-conformance-python-")
    python = launcher_in(launchers)
    warm = zygote.start(python)
    try:
        return _run(options, client_command(python))
    finally:
        zygote.stop(warm)
        shutil.rmtree(launchers, ignore_errors=True)


def _run(options: argparse.Namespace, command: str) -> int:
    suites = [s for s in installed_suites() if not options.suite or s.version == options.suite]
    planned = [p for suite in suites for p in plan(suite) if fnmatch.fnmatchcase(p.scenario, options.only)]
    if not planned:
        print("no scenario matches", file=sys.stderr)
        return 2
    folders = [result_folder(item) for item in planned]
    shared = sorted({str(folder) for folder in folders if folders.count(folder) > 1})
    if shared:  # runs at once must never write to the same folder
        sys.exit(f"planned runs share a results folder: {', '.join(shared)}")
    RESULTS.mkdir(exist_ok=True)
    started = time.monotonic()
    outcomes = run_all(planned, command, options.timeout, options.jobs)
    (RESULTS / "summary.json").write_text(json.dumps([asdict(o) for o in outcomes], indent=2) + "\n")
    (RESULTS / "summary.md").write_text(markdown(outcomes))
    print_table(outcomes)
    print(f"results: {RESULTS.relative_to(ROOT)}/ (summary.md, summary.json, one folder per run)")
    print(f"wall time: {time.monotonic() - started:.0f} s, {options.jobs} run(s) at a time")
    return 1 if any(o.fails_run for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
