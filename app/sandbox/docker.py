"""``docker``: one unprivileged container per agent through the Docker SDK (the ``docker``
extra), labelled with its owning process so a later start reaps those of dead owners. Each
run carries ``OPENMANUS_RUN_SCOPE`` in its environment: through the container's pids cgroup
the host finds exactly its processes and sees refused forks (docs/sandbox.md)."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import json
import os
import secrets
import signal
import socket
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from app.config import SandboxSettings
from app.exceptions import SandboxError, SandboxUnavailableError
from app.logger import logger
from app.sandbox import docker_relay, netblock
from app.sandbox.base import PRIVATE_ENTRIES, LaunchSpec, Sandbox
from app.sandbox.files import FileAccessPolicy
from app.sandbox.guard import ProcessGuard, cgroup_members, pids_cgroup_dirs
from app.sandbox.hostside import HOST_CWD, python_argv, start_reaper
from app.sandbox.processes import (
    ProcessScope,
    group_members,
    is_alive,
    kill_each,
    signal_group,
    stat_fields,
)
from app.utils.sizes import parse_size

LABEL = "openmanus.sandbox"
OWNER_LABEL = "openmanus.owner"
RUN_LABEL = "openmanus.run"

#: Places a Docker engine socket lives; binding one (or a directory above it) into a
#: container would hand the model the engine, i.e. root on the host.
_ENGINE_SOCKETS = ("/var/run/docker.sock", "/run/docker.sock", "/run/containerd/containerd.sock")

#: The image scripts/setup-docker.sh builds offline from Debian packages.
BUILT_IMAGE = "openmanus-sandbox:latest"

_T = TypeVar("_T")

_unpullable: dict[str, str] = {}  # image -> why pulling it failed (asked once per process)
_fallback_told: set[str] = set()


@functools.cache
def run_id() -> str:
    """This run's id (``$OPENMANUS_RUN_ID``, else one per process), put on its containers."""
    return os.environ.get("OPENMANUS_RUN_ID") or uuid.uuid4().hex[:12]


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown-boot"


def _start_time(pid: int) -> str | None:
    """The start time of ``pid`` (clock ticks since boot), None if there is no such process."""
    fields = stat_fields(pid) or []
    return fields[19].decode() if len(fields) > 19 else None


def owner_id(pid: int | None = None) -> str:
    """``host/boot/pid/start``: never confused with a later process reusing the pid."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}/{_boot_id()}/{pid}/{_start_time(pid) or '?'}"


def _owner_is_gone(owner: str) -> bool:
    """Whether the process named by an owner label is dead (only for owners of this host)."""
    parts = owner.split("/")
    if len(parts) != 4 or parts[0] != socket.gethostname():
        return False  # another machine sharing the engine: not ours to judge
    host_boot, pid_text, start = parts[1], parts[2], parts[3]
    if host_boot != _boot_id():
        return True  # started before this machine's last boot
    if not pid_text.isdigit():
        return False
    return _start_time(int(pid_text)) != start


def docker_client() -> Any:
    """A connected Docker SDK client; SandboxUnavailableError saying what to do otherwise."""
    try:
        import docker
        from docker.errors import DockerException
    except ImportError as exc:
        raise SandboxUnavailableError(
            "sandbox backend 'docker' needs the Docker SDK: pip install -e '.[docker]'"
        ) from exc
    try:
        client = docker.from_env()
        client.ping()
    except DockerException as exc:
        raise SandboxUnavailableError(
            f"sandbox backend 'docker': no Docker engine is reachable ({exc}); start "
            "Docker (scripts/setup-docker.sh) or set DOCKER_HOST, or use backend = "
            '"bubblewrap" or "local"'
        ) from exc
    return client


def _remove(container: Any) -> None:
    try:
        container.remove(force=True)
    except Exception as exc:
        if type(exc).__name__ != "NotFound":
            logger.warning(f"could not remove sandbox container {container.id[:12]}: {exc}")


def _reap(client: Any, label: str, doomed: Callable[[Any], bool]) -> list[str]:
    """Remove the sandbox containers carrying ``label`` that are ``doomed``; their ids."""
    removed = []
    # ignore_removed: a container another process removes meanwhile is skipped, not a 404.
    found = client.containers.list(all=True, filters={"label": label}, ignore_removed=True)
    for container in found:
        if doomed(container):
            _remove(container)
            removed.append(container.id)
    return removed


def reap_stale_containers(client: Any) -> list[str]:
    """Remove sandbox containers whose owning process (on this host) is gone; their ids."""
    removed = _reap(client, LABEL, lambda c: _owner_is_gone(c.labels.get(OWNER_LABEL, "")))
    if removed:
        logger.info(f"removed {len(removed)} sandbox container(s) left by an earlier run")
    return removed


def reap_own_containers() -> list[str]:
    """Remove every sandbox container this process still owns (runs at interpreter exit)."""
    try:
        import docker

        client = docker.from_env()
    except Exception:
        return []
    try:
        return _reap(client, f"{OWNER_LABEL}={owner_id()}", lambda c: True)
    except Exception as exc:
        logger.warning(f"could not list this run's sandbox containers: {exc}")
        return []
    finally:
        client.close()


@functools.cache  # once per process
def _register_exit_reaper() -> None:
    atexit.register(reap_own_containers)


def _socket_paths() -> list[Path]:
    paths = [Path(p) for p in _ENGINE_SOCKETS]
    host = os.environ.get("DOCKER_HOST", "")
    if host.startswith("unix://"):
        paths.append(Path(host[len("unix://") :]))
    return paths


def check_bindings(bindings: dict[str, str], work_dir: str) -> dict[str, str]:
    """``{host_dir: container_dir}`` made absolute and checked; SandboxError naming the problem
    (relative container paths, the engine's socket or a directory holding it)."""
    checked: dict[str, str] = {}
    for host, inside in bindings.items():
        if not str(inside).startswith("/"):
            raise SandboxError(f"volume_bindings: container path {inside!r} must be absolute")
        real = Path(os.path.realpath(Path(host).expanduser()))
        for sock in _socket_paths():
            sock_real = Path(os.path.realpath(sock))
            if sock_real == real or sock_real.is_relative_to(real) or sock == real:
                raise SandboxError(
                    f"volume_bindings: {host!r} would expose the Docker engine's socket "
                    f"({sock}) to sandboxed code; bind a directory that does not contain it"
                )
        if real.exists() and not real.is_dir() and real.is_socket():
            raise SandboxError(f"volume_bindings: {host!r} is a socket; bind directories/files")
        if inside.rstrip("/") == work_dir.rstrip("/"):
            raise SandboxError(
                f"volume_bindings: {inside!r} is the workspace mount; pass that directory "
                "as the workspace instead"
            )
        checked[str(real)] = inside.rstrip("/") or "/"
    return checked


def _block_metadata(client: Any, container: Any, image: str) -> None:
    """Make the instance metadata addresses unreachable from a networked container
    (:mod:`.netblock`): a one-off container of the same image joins its network namespace
    with ``NET_ADMIN`` alone and adds the routes, before any command of the model's (whose
    processes never have that capability; an ``exec`` cannot get more than the container's
    dropped set). A container where that fails is removed: a network that reaches the
    metadata service is never handed out."""
    from docker.errors import DockerException

    try:
        _retrying_runc(
            lambda: client.containers.run(
                image,
                ["python3", "-I", "-S", "-c", netblock.block_program(sink=True)],
                network_mode=f"container:{container.id}",
                user="0:0",
                cap_drop=["ALL"],
                cap_add=["NET_ADMIN"],
                security_opt=["no-new-privileges"],
                read_only=True,
                working_dir="/",
                labels={LABEL: "1", OWNER_LABEL: owner_id(), RUN_LABEL: run_id()},
                remove=True,
                stdout=False,
                stderr=True,
            ),
            "the network helper",
        )
    except DockerException as exc:
        stopped = _stopped_state(container)
        _remove(container)
        if stopped is not None:
            raise _ContainerStopped(
                f"sandbox backend 'docker': the container stopped while starting ({stopped})"
            ) from exc
        stderr = getattr(exc, "stderr", None)
        problem = stderr.decode(errors="replace").strip() if stderr else str(exc)
        raise SandboxUnavailableError(
            "sandbox backend 'docker': could not block the cloud instance metadata addresses "
            f"in the container ({problem}); network_enabled = true needs python3 in the image"
        ) from exc


def _retrying_runc(start: Callable[[], _T], what: str) -> _T:
    """``start()``, tried up to three times on runc's transient failures on a loaded machine
    ("OCI runtime create failed", seen even as "exec: python3: executable file not found" for
    an image that has it); anything else is final."""
    from docker.errors import DockerException

    for attempt in range(3):
        try:
            return start()
        except DockerException as exc:
            if attempt == 2 or "OCI runtime" not in str(exc):
                raise
            logger.info(f"the engine could not start {what} ({exc}); retrying")
    raise AssertionError("unreachable")


class _ContainerStopped(SandboxUnavailableError):
    """The container ended before it was handed out (the engine's state says how)."""


def _stopped_state(container: Any) -> str | None:
    """How a container that is no longer running ended (None: running, or unknown)."""
    try:
        container.reload()
        state = container.attrs["State"]
    except Exception:
        return None
    if state.get("Running"):
        return None
    parts = [f"status {state.get('Status')}", f"exit code {state.get('ExitCode')}"]
    if state.get("OOMKilled"):
        parts.append("killed for memory")
    if state.get("Error"):
        parts.append(str(state["Error"]))
    return ", ".join(parts)


class ContainerGuard(ProcessGuard):
    """The container's own pids cgroup, read only (the engine enforces ``pids_limit``): refused
    forks and the process count; nothing with a remote engine (DOCKER_HOST)."""

    @property
    def cgroup_procs(self) -> str | None:
        return None  # nothing on the host joins the container's cgroup

    def open(self) -> None:
        return None

    def attach(self, init_pid: int | None) -> None:
        """Find the pids cgroup of the container's init (host pid), if visible."""
        dirs = pids_cgroup_dirs(init_pid) if init_pid else iter(())
        self.cgroup = next((base for base, _ in dirs if (base / "pids.max").exists()), None)

    def track(self, scope: Any) -> None:
        return None

    def make_room(self) -> bool:
        """Never moves the container's processes: the engine owns that cgroup, and its
        limits (pids, memory) hold only inside it. The container's init reaps the dead."""
        return self.has_room()

    async def close(self) -> None:
        self.cgroup = None  # the engine removes it with the container


#: Environment variable marking every process of one run inside the container (inherited by
#: all it starts, ``setsid`` or not), so the run can be found and killed from the host.
RUN_MARKER = "OPENMANUS_RUN_SCOPE"


def _has_marker(pid: int, marker: bytes) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return marker in environ.split(b"\0")


def _relay_token(pid: int) -> str | None:
    """The run marker a relay process was started with (from its command line)."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    for arg in args:
        if arg.startswith(b"{"):
            with contextlib.suppress(ValueError, AttributeError):
                token = json.loads(arg)["env"][RUN_MARKER]
                return str(token)
    return None


class ContainerScope(ProcessScope):
    """A run in the container: the relay on the host (group leader) plus every container
    process carrying the run's marker (found through the container's cgroup; without one, a
    remote engine, signals go through the relay to the run's process group inside)."""

    def __init__(self, leader: int, guard: ContainerGuard, token: str) -> None:
        super().__init__(leader)
        self._guard = guard
        self._marker = f"{RUN_MARKER}={token}".encode()

    def _inside(self) -> list[int] | None:
        cgroup = self._guard.cgroup
        if cgroup is None:
            return None
        return [p for p in cgroup_members(cgroup) if is_alive(p) and _has_marker(p, self._marker)]

    def members(self) -> list[int] | None:
        group = group_members(self.leader)
        inside = self._inside()
        if group is None and inside is None:
            return None
        return sorted(set(group or ()) | set(inside or ()))

    def signal(self, sig: int) -> bool:
        inside = self._inside()
        if inside is None:
            return signal_group(self.leader, sig)  # the relay forwards it
        delivered = kill_each(inside, sig)
        if sig == signal.SIGKILL or not inside:
            delivered = signal_group(self.leader, sig) or delivered
        return delivered


class DockerSandbox(Sandbox):
    """Commands run through ``docker exec`` (via a small relay process, see docker_relay)."""

    backend = "docker"
    signal_as_status = True

    def __init__(
        self,
        settings: SandboxSettings | None = None,
        workspace: str | os.PathLike[str] | None = None,
        *,
        volume_bindings: dict[str, str] | None = None,
    ) -> None:
        super().__init__(settings, workspace)
        self.volume_bindings = check_bindings(dict(volume_bindings or {}), self.settings.work_dir)
        #: The Docker SDK client and container (``docker.models.containers.Container``) while
        #: started, else None.
        self.client: Any = None
        self.container: Any = None
        self._container_guard = ContainerGuard(self.limits.max_processes)
        self.guard = self._container_guard
        self._pending_tokens: list[str] = []
        self._has_prlimit = False
        self._reaper: subprocess.Popen[bytes] | None = None
        #: ``uid:gid`` commands run as in the container: the agent's own (root: no capabilities).
        self.user = f"{os.getuid()}:{os.getgid()}" if os.getuid() != 0 else "0:0"

    @property
    def container_id(self) -> str | None:
        return self.container.id if self.container is not None else None

    @property
    def workdir(self) -> str:
        return self.settings.work_dir

    @property
    def python(self) -> str:
        return "python3"

    @property
    def shell(self) -> str:
        return "/bin/bash"

    @classmethod
    def attach(cls, container: Any, user: str = "") -> DockerSandbox:
        """A backend for :meth:`command` and :meth:`scope` in a running container started
        elsewhere (upstream's terminal), as ``user`` ("": the container's own); never removed."""
        box = cls(workspace="/")
        box.container, box.client, box.user = container, container.client, user
        with contextlib.suppress(Exception):  # a remote engine: no host pid to find
            container.reload()
            box._container_guard.attach(int(container.attrs["State"]["Pid"]) or None)
        return box

    async def _start(self) -> None:
        await asyncio.to_thread(self._start_sync)

    def _start_sync(self) -> None:
        from docker.errors import DockerException

        client = docker_client()
        try:
            reap_stale_containers(client)
            image = self._resolve_image(client)
            memory = parse_size(self.settings.memory_limit)
            volumes = {str(self.workspace): {"bind": self.workdir, "mode": "rw"}}
            for host, inside in self.volume_bindings.items():
                Path(host).mkdir(parents=True, exist_ok=True)
                volumes[host] = {"bind": inside, "mode": "rw"}
            _register_exit_reaper()
            try:
                created = self._create_started(client, image, memory, volumes)
            except _ContainerStopped as exc:
                # Seen once on a loaded machine, without a reason the engine could give: a
                # fresh container starts. A second that stops too is reported.
                logger.warning(f"{exc}; starting another")
                created = self._create_started(client, image, memory, volumes)
            self.container = created
            # Removes the container as soon as this process is gone, even after kill -9
            # (later starts would, too, but only if there is a later start).
            self._reaper = start_reaper(
                {"container": created.id}, site=True, what="sandbox 'docker'"
            )
        except SandboxUnavailableError:
            client.close()
            raise
        except DockerException as exc:
            client.close()
            raise SandboxUnavailableError(f"could not start the sandbox container: {exc}") from exc
        self.client = client
        try:
            # Per-process limits (RLIMIT_DATA: a MemoryError before the container's OOM
            # killer; CPU time; file size) need util-linux's prlimit in the image.
            probe = self.container.exec_run(["prlimit", "--version"], user=self.user)
            self._has_prlimit = probe.exit_code == 0
            if not self._has_prlimit:
                logger.info(f"image {image} has no prlimit: only the container's limits apply")
            self.container.reload()
            self._container_guard.attach(int(self.container.attrs["State"]["Pid"]))
        except (DockerException, KeyError, TypeError, ValueError):
            self._container_guard.attach(None)

    def _create_started(
        self, client: Any, image: str, memory: int | None, volumes: dict[str, Any]
    ) -> Any:
        """A new container of ``image``, started (and with a network: the metadata blocked)."""
        created = client.containers.create(
            image,
            # Idles outside the workspace (what runs there is the model's); every
            # command gets its working directory explicitly.
            command=["tail", "-f", "/dev/null"],
            init=True,
            hostname="sandbox",
            working_dir="/",
            user=self.user,
            mem_limit=memory,
            memswap_limit=memory,
            nano_cpus=int(self.settings.cpu_limit * 1e9),
            pids_limit=self.settings.max_processes,
            network_mode="bridge" if self.settings.network_enabled else "none",
            volumes=volumes,
            read_only=True,
            tmpfs=self._tmpfs(),
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            privileged=False,
            labels={LABEL: "1", OWNER_LABEL: owner_id(), RUN_LABEL: run_id()},
        )
        try:
            _retrying_runc(created.start, "the container")
        except BaseException:
            _remove(created)  # created but not started: not left behind
            raise
        if self.settings.network_enabled:
            _block_metadata(client, created, image)
        return created

    def _resolve_image(self, client: Any) -> str:
        """``[sandbox] image``, pulled if missing. When the image was left at its default and
        cannot be pulled (no registry), the one scripts/setup-docker.sh built offline."""
        from docker.errors import DockerException, ImageNotFound

        image = self.settings.image
        with contextlib.suppress(ImageNotFound):
            client.images.get(image)
            return image
        problem = _unpullable.get(image)
        if problem is None:
            logger.info(f"pulling sandbox image {image}")
            try:
                client.images.pull(image)
                return image
            except DockerException as exc:
                problem = _unpullable[image] = str(exc)
        if "image" not in self.settings.model_fields_set:
            fallback = os.environ.get("OPENMANUS_SANDBOX_IMAGE") or BUILT_IMAGE
            with contextlib.suppress(ImageNotFound):
                client.images.get(fallback)
                if fallback not in _fallback_told:
                    _fallback_told.add(fallback)
                    logger.info(f"sandbox image {image} cannot be pulled here; using {fallback}")
                return fallback
        raise SandboxUnavailableError(
            f"sandbox image {image!r} is not on this machine and could not be pulled "
            f"({problem}); build one offline with scripts/setup-docker.sh and set [sandbox] "
            f'image = "{BUILT_IMAGE}" (docs/sandbox.md)'
        )

    async def _cleanup(self) -> None:
        container, client = self.container, self.client
        self.container = self.client = None

        self.guard.cgroup = None

        reaper, self._reaper = self._reaper, None

        def work() -> None:
            if container is not None:
                _remove(container)
            if client is not None:
                client.close()
            if reaper is not None:
                with contextlib.suppress(OSError):
                    if reaper.stdin is not None:
                        reaper.stdin.close()  # its cue (the container is gone already)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    reaper.wait(10)

        await asyncio.to_thread(work)

    def _wrap(
        self, argv: list[str], rlimits: dict[str, int], env: dict[str, str], cwd: str
    ) -> LaunchSpec:
        if self.container is None:
            raise SandboxError("the docker sandbox is not started")
        token = secrets.token_hex(8)
        self._pending_tokens = [*self._pending_tokens[-7:], token]
        env = {**env, RUN_MARKER: token}
        limits = rlimits if self._has_prlimit else {}
        options = json.dumps({"cwd": cwd, "env": env, "user": self.user, "rlimits": limits})
        # The relay is ours, not the model's: it keeps the agent's environment (DOCKER_HOST...),
        # and runs isolated, from its file, outside the workspace (what the model writes there
        # is never imported on the host: docs/sandbox.md).
        relay = python_argv(docker_relay.__file__, self.container.id, options, "--", *argv)
        return LaunchSpec(argv=relay, env=dict(os.environ), cwd=HOST_CWD)

    def _tmpfs(self) -> dict[str, str]:
        """The private ``/tmp``, and an empty read-only tmpfs over the session files (which
        ``--resume`` restores: not for sandboxed code to read or rewrite)."""
        mounts = {"/tmp": "rw,nosuid,nodev,size=256m"}
        sessions = self.workspace / PRIVATE_ENTRIES[0]
        if sessions.is_dir() and not sessions.is_symlink():
            inside = self.workdir.rstrip("/") + "/" + PRIVATE_ENTRIES[0]
            mounts[inside] = "ro,nosuid,nodev,noexec,size=4k"
        return mounts

    def _scope(self, leader: int) -> ProcessScope:
        """The run whose relay is ``leader``: its marker is read from the relay's arguments."""
        token = _relay_token(leader)
        if token is None:  # no /proc: the run started last from command()
            token = self._pending_tokens[-1] if self._pending_tokens else secrets.token_hex(8)
        self._pending_tokens.clear()
        return ContainerScope(leader, self._container_guard, token)

    def _mounts(self) -> list[tuple[str, str]]:
        """(container dir, host dir) of every bind mount, the longest container path first."""
        mounts = [(self.workdir.rstrip("/") or "/", str(self.workspace))]
        mounts += [(inside, host) for host, inside in self.volume_bindings.items()]
        return sorted(mounts, key=lambda m: len(m[0]), reverse=True)

    def to_host_path(self, path: str) -> str:
        for inside, host in self._mounts():
            if path == inside or path.startswith(inside.rstrip("/") + "/"):
                return host + path[len(inside.rstrip("/")) :]
        return path

    def to_sandbox_path(self, text: str) -> str:
        for inside, host in self._mounts():
            text = text.replace(host, inside.rstrip("/"))
        return text

    def policy(self, allowed_paths: tuple[Path, ...] | list[Path] = ()) -> FileAccessPolicy:
        """The workspace and every bound directory (what the container can see of the host)."""
        extra = [*allowed_paths, *(Path(host) for host in self.volume_bindings)]
        return FileAccessPolicy.create(self.workspace, extra, owner=self.file_owner)
