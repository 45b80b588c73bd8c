"""``/schedules/new`` and ``/schedules/{name}/edit``: create, edit and archive runtime
schedules from forms, as the API's admin role does.

Every write needs the role ``roles.py`` gives it, admin (a login with an admin token of
``CRON_API_TOKENS``), the session's CSRF token, and goes through the store's
``ScheduleAdmin`` as every other writer: a refusal re-shows the form with what to fix, a
stale version says who came first. The file's schedules are shown read-only: the file owns
them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING
from urllib.parse import quote

from aiohttp import web

from warren_cron.errors import (
    InvalidSchedule,
    NameTaken,
    ScheduleNotFound,
    StoreError,
    VersionConflict,
)
from warren_cron.monitor.dashboard.pages.common import log
from warren_cron.monitor.dashboard.pages.spec_form import FLAGS, created, form_fields, form_values
from warren_cron.monitor.roles import Action
from warren_cron.monitor.web.auth import Actor, Refused
from warren_cron.monitor.web.dashboard import dashboard_of
from warren_cron.ops import schedule_writes as writes
from warren_cron.store.masking import shown_spec
from warren_cron.store.stored import StoredSchedule

if TYPE_CHECKING:
    from warren_cron.monitor.web.dashboard import WebDashboard

#: The largest form read: a schedule is at most 64 KiB as JSON, and a form escapes it.
MAX_FORM = 256 * 1024
NO_STORE = (
    "runtime schedules are written here only when the monitor follows their store: set "
    "CRON_API_TOKENS on the monitor (an admin token of it logs in to write)"
)
Write = Callable[[Actor, Mapping[str, str], str | None], Awaitable[StoredSchedule]]
#: What the note after a write says was done.
DONE: dict[Action, str] = {"create": "created", "update": "saved", "archive": "archived"}


async def new_form(request: web.Request) -> web.StreamResponse:
    """An empty form for a new runtime schedule."""
    return _form_page(request, None, form_values(None))


async def edit_form(request: web.Request) -> web.StreamResponse:
    """The form of a runtime schedule, filled in; a file's schedule read-only."""
    dashboard, name = dashboard_of(request), request.match_info["name"]
    in_file = dashboard.by_name.get(name)
    if in_file is not None:
        return _form_page(request, name, form_values(shown_spec(in_file.spec)), owner="file")
    stored = await _stored(dashboard, name)
    owner = "file" if stored.from_file else stored.manager
    return _form_page(request, name, form_values(shown_spec(stored.spec)), stored, owner=owner)


async def create(request: web.Request) -> web.StreamResponse:
    """Create a runtime schedule from the form."""

    async def write(actor: Actor, form: Mapping[str, str], why: str | None) -> StoredSchedule:
        fields, problems = form_fields(form)
        if problems:
            raise InvalidSchedule(str(fields.get("name") or "?"), problems)
        dashboard = dashboard_of(request)
        return await writes.create_schedule(
            dashboard.api.admin, created(fields), actor.by, why, audit_to=dashboard.history
        )

    return await _written(request, None, "create", write)


async def edit(request: web.Request) -> web.StreamResponse:
    """Change a runtime schedule to the form's fields, from the version the form was read at."""
    name = request.match_info["name"]

    async def write(actor: Actor, form: Mapping[str, str], why: str | None) -> StoredSchedule:
        fields, problems = form_fields(form)
        if problems:
            raise InvalidSchedule(name, problems)
        fields.pop("name", None)  # a schedule is not renamed: the URL names it
        dashboard = dashboard_of(request)
        return await writes.update_schedule(
            dashboard.api.admin,
            name,
            fields,
            _version(form),
            actor.by,
            why,
            audit_to=dashboard.history,
        )

    return await _written(request, name, "update", write)


async def archive(request: web.Request) -> web.StreamResponse:
    """Archive a runtime schedule, if it is still at the version the page showed."""
    name = request.match_info["name"]

    async def write(actor: Actor, form: Mapping[str, str], why: str | None) -> StoredSchedule:
        dashboard = dashboard_of(request)
        return await writes.archive_schedule(
            dashboard.api.admin, name, _version(form), actor.by, why, audit_to=dashboard.history
        )

    return await _written(request, name, "archive", write)


async def _written(
    request: web.Request, name: str | None, action: Action, write: Write
) -> web.StreamResponse:
    """Check who writes and what, write, and show the schedule (or the form again, with
    what to fix)."""
    dashboard = dashboard_of(request)
    back = "/schedules/new" if name is None else _edit_path(name)
    try:
        form = await _read_form(request)
        actor = _writer(dashboard, request, form, action)
    except Refused as refused:
        log.warning("dashboard schedule write refused", why=refused.why)
        return dashboard.refusal(request, "refused.html", refused, why=refused.why, back=back)
    why = " ".join(form.get("why", "").split())[:300] or None
    try:
        stored = await write(actor, form, why)
    except StoreError as error:
        if name is not None and "task" not in form:  # the archive form: show the schedule
            return await _refused_archive(request, name, error)
        return _refused_write(request, name, form, error)
    log.info("dashboard schedule change", schedule=stored.name, by=actor.by, version=stored.version)
    dashboard.notes.leave(
        request, f"{DONE[action]} {stored.name}: version {stored.version}, {stored.status}"
    )
    raise web.HTTPSeeOther(_edit_path(stored.name))


def _writer(
    dashboard: WebDashboard, request: web.Request, form: Mapping[str, str], action: Action
) -> Actor:
    """Who writes, when their role may do ``action``, and the store is followed; else
    ``Refused``."""
    actor = dashboard.auth.actor(request, form, action)
    if not dashboard.api.has_store:
        raise Refused(NO_STORE, status=409)
    return actor


def _refused_write(
    request: web.Request, name: str | None, form: Mapping[str, str], error: StoreError
) -> web.Response:
    """The form again, as sent, with the store's refusal next to it."""
    status, problems = _problems(error)
    values = {**form_values(None), **form}
    values |= {key: form.get(key, "") for key in FLAGS}  # an unticked box sends nothing
    return _form_page(request, name, values, problems=problems, status=status)


async def _refused_archive(request: web.Request, name: str, error: StoreError) -> web.Response:
    """The schedule's form as it stands now, with why the archive was not done."""
    status, problems = _problems(error)
    try:
        stored = await dashboard_of(request).api.admin.get(name, sync=False)
    except ScheduleNotFound:
        raise web.HTTPNotFound(text=f"no schedule {name!r}: /schedules lists them") from None
    values = form_values(shown_spec(stored.spec))
    owner = "file" if stored.from_file else stored.manager
    return _form_page(request, name, values, stored, owner=owner, problems=problems, status=status)


def _problems(error: StoreError) -> tuple[int, list[str]]:
    if isinstance(error, InvalidSchedule):
        return 400, error.problems
    if isinstance(error, VersionConflict):
        return 409, [
            f"not saved: this schedule changed since you opened the form (you edited version "
            f"{error.expected}; version {error.current} is current). Reload the form to see "
            "the current fields, then make your change again"
        ]
    if isinstance(error, NameTaken | ScheduleNotFound):
        return 409 if isinstance(error, NameTaken) else 404, [str(error)]
    return 503, [f"the store did not answer: {error}; try again"]


def _form_page(
    request: web.Request,
    name: str | None,
    values: Mapping[str, str],
    stored: StoredSchedule | None = None,
    *,
    owner: str | None = None,
    problems: list[str] | None = None,
    status: int = 200,
) -> web.Response:
    dashboard = dashboard_of(request)
    version = values.get("version") or (str(stored.version) if stored else "")
    return dashboard.page(
        request,
        "schedule_form.html",
        status=status,
        schedule=name,
        values=values,
        version=version,
        stored=stored,
        owner=owner,
        readonly=owner is not None,
        problems=problems or [],
        flagged=_flagged(problems or []),
        has_store=dashboard.api.has_store,
        session=dashboard.auth.session(request),
    )


def _flagged(problems: list[str]) -> dict[str, list[str]]:
    """Each problem under the fields its text starts with (``cron, every: ...``)."""
    flagged: dict[str, list[str]] = {}
    for problem in problems:
        named, _, _ = problem.partition(":")
        for field in named.split(","):
            key = field.strip().split(".")[0].split("[")[0]
            flagged.setdefault(key, []).append(problem)
    return flagged


async def _stored(dashboard: WebDashboard, name: str) -> StoredSchedule:
    if not dashboard.api.has_store:
        raise web.HTTPNotFound(text=f"no schedule {name!r} in the file; {NO_STORE}")
    try:
        return await dashboard.api.admin.get(name, sync=False)
    except ScheduleNotFound:
        raise web.HTTPNotFound(text=f"no schedule {name!r}: /schedules lists them") from None


async def _read_form(request: web.Request) -> dict[str, str]:
    if (request.content_length or 0) > MAX_FORM:
        raise _too_large(request.content_length or 0)
    try:
        posted = await request.post()
    except web.HTTPRequestEntityTooLarge:
        raise _too_large(request.content_length or 0) from None
    return {key: value for key, value in posted.items() if isinstance(value, str)}


def _too_large(size: int) -> Refused:
    return Refused(
        f"the form is {size} bytes, over {MAX_FORM}: a schedule is at most 64 KiB as JSON; "
        "keep the payload small and let the task fetch large data",
        status=413,
    )


def _version(form: Mapping[str, str]) -> int:
    text = form.get("version", "")
    if not text.isdigit():
        raise InvalidSchedule("?", ["version: the form lost the version it was read at: reload it"])
    return int(text)


def _edit_path(name: str) -> str:
    return f"/schedules/{quote(name, safe='')}/edit"


def add_routes(app: web.Application) -> None:
    """The schedule forms and their writes."""
    app.router.add_get("/schedules/new", new_form)
    app.router.add_post("/schedules/new", create)
    app.router.add_get("/schedules/{name}/edit", edit_form)
    app.router.add_post("/schedules/{name}/edit", edit)
    app.router.add_post("/schedules/{name}/archive", archive)
