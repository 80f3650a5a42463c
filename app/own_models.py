"""A user's own model on the dashboard: a Hugging Face config.json (and its
hf_quant_config.json) uploaded or pasted in the sidebar beside the target choice, read by
`simulator.inputs.hf_config.read_config` once per content (sha256), and a target choice on
every page for the browser session; kept in the team's library (kind `model`), it is a
choice in every session, after a restart too.

Own models' ids start with PREFIX, so none shadows a catalog id. Everything a user typed
or uploaded is shown through `widgets.plain`, as text. Imports nothing of `app.widgets` or
`app.sim` (both read the models from here).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath

import streamlit as st

from app.library_open import library, who
from app.text import plain
from library.errors import LibraryError
from simulator.errors import InputError
from simulator.inputs.specs import ModelSpec

PREFIX = "user:"
"""Id prefix of an own model: PREFIX plus its name ('user:my-qwen3')."""
STORE_KEY = "own_models"
"""Session state: {model id: OwnModel}, the models this session uploaded or pasted."""
MSG_KEY = "own_model_msg"
UPLOAD_KEY, QUANT_KEY, PASTE_KEY = "own_config_file", "own_quant_file", "own_config_text"
MAX_CONFIG_BYTES = 8 * 1024 * 1024
"""Largest config.json or hf_quant_config.json, in bytes: the largest aiconfigurator-core
ships is 3 MB (MiniMax-M3-NVFP4, which lists every excluded layer); most are a few kB."""
MAX_UPLOAD_MB = MAX_CONFIG_BYTES // (1024 * 1024)
MAX_PASTE_CHARS = 1_000_000
"""A pasted config.json: a text box holds a few kB with ease, a MB at most."""
KIND = "model"
UNREAD = (InputError, ValueError, TypeError, LookupError, ArithmeticError)
"""What reading a config may raise: InputError naming the field by contract; the others
only from a reader's bug, still a message rather than a traceback."""


@dataclass(frozen=True)
class OwnModel:
    """One uploaded or pasted model: its files' text and the digest of the pair."""

    config: str
    quant: str | None
    digest: str


def model_id(name: str) -> str:
    return PREFIX + name


def _content(config: str, quant: str | None) -> bytes:
    from library.kinds import model_content

    return model_content(config, quant)


def digest_of(config: str, quant: str | None) -> str:
    """sha256 (hex) of the library content these files make: the key of every cache."""
    return hashlib.sha256(_content(config, quant)).hexdigest()


@st.cache_data(show_spinner=False, max_entries=128)
def _parse(digest: str, model_id: str, _config: str, _quant: str | None) -> ModelSpec:
    from library.kinds import read_model

    return read_model(_config, _quant, model_id=model_id)


def parse(config: str, quant: str | None, model_id: str) -> ModelSpec:
    """The `ModelSpec` of these files under `model_id`, read once per content. Raises
    InputError naming the field."""
    return _parse(digest_of(config, quant), model_id, config, quant)


def session_models() -> dict[str, OwnModel]:
    return st.session_state.setdefault(STORE_KEY, {})


# ---------------------------------------------------------------- kept in the library
@st.cache_data(show_spinner=False, max_entries=8)
def _kept_list(where: str, version: tuple) -> list[tuple[str, str]]:
    lib, _ = library()
    return [(e.name, e.content_hash) for e in lib.entries(KIND)]


@st.cache_data(show_spinner=False, max_entries=256)
def _kept_spec(where: str, name: str, content_hash: str) -> tuple[ModelSpec | None, str]:
    """(spec, "") of a kept model, or (None, why) where today's reader refuses it."""
    from library.kinds import load_model_entry

    lib, _ = library()
    try:
        return load_model_entry(lib, name, model_id=model_id(name)), ""
    except UNREAD as exc:
        return None, _why(exc)


KEPT_TTL_S = 1.0
"""How long a rerun trusts the library's list of models: a page asks for the models a
few times a run (0.5-1 ms a query each); a teammate's save shows within this time, one's
own at once (`forget_kept_list`)."""


@st.cache_data(show_spinner=False, max_entries=8, ttl=KEPT_TTL_S)
def _kept_version(where: str) -> tuple:
    lib, _ = library()
    return lib.table_version((KIND,))


def forget_kept_list() -> None:
    _kept_version.clear()


def kept() -> dict[str, tuple[str, ModelSpec | None, str]]:
    """{model id: (content hash, spec or None, why not)} of the models in the library;
    {} without one (or when it does not answer)."""
    lib, _ = library()
    if lib is None:
        return {}
    try:
        names = _kept_list(lib.where, _kept_version(lib.where))
    except LibraryError:
        return {}
    out = {}
    for name, content_hash in names:
        spec, why = _kept_spec(lib.where, name, content_hash)
        out[model_id(name)] = (content_hash, spec, why)
    return out


def own_models() -> tuple[dict[str, ModelSpec], dict[str, str]]:
    """({model id: spec}, {model id: digest}) of the library's models and this session's
    (a session's upload under a kept name is the one this session plans with)."""
    specs, digests = {}, {}
    for mid, (content_hash, spec, _) in kept().items():
        if spec is not None:
            specs[mid], digests[mid] = spec, content_hash
    for mid, own in session_models().items():
        try:
            specs[mid] = parse(own.config, own.quant, mid)
        except UNREAD:  # kept only after it parsed; a changed reader may refuse it
            continue
        digests[mid] = own.digest
    return specs, digests


def forget_missing(model_ids: list[str], defaults: dict[str, str]) -> None:
    """A target or draft that was an own model no longer there (a teammate deleted or
    renamed it in the library) goes back to its default (`defaults`: key -> id), and the
    sidebar says so."""

    for key, default in defaults.items():
        value = st.session_state.get(key)
        if isinstance(value, str) and value.startswith(PREFIX) and value not in model_ids:
            st.session_state[key] = default
            st.sidebar.warning(f"{plain(value)} is no longer kept: back to the default {key}.")


# ---------------------------------------------------------------- the sidebar control
def default_name(config: str, file_name: str = "") -> str:
    """The name an upload gets: the checkpoint's `_name_or_path` (its last part), else the
    file's name unless that is config.json, else its `model_type`."""
    try:
        value = json.loads(config)
    except ValueError:
        value = None
    value = value if isinstance(value, dict) else {}
    path = value.get("_name_or_path")
    if isinstance(path, str) and PurePosixPath(path).name.strip():
        return PurePosixPath(path).name.strip()[:120]
    stem = PurePosixPath(file_name).stem.strip()
    if stem and stem.lower() not in ("config", "config.json"):
        return stem[:120]
    kind = value.get("model_type")
    return kind.strip()[:120] if isinstance(kind, str) and kind.strip() else "my-model"


def _why(exc: Exception) -> str:
    if isinstance(exc, InputError):
        return str(exc)
    return f"config.json could not be read ({type(exc).__name__}: {exc})"


def _message(ok: bool, text: str) -> None:
    st.session_state[MSG_KEY] = (ok, text)


def _read_upload(key: str, what: str) -> tuple[str | None, str]:
    """(text or None, file name) of an uploader's file; InputError when it is too large or
    not UTF-8 text."""
    up = st.session_state.get(key)
    if up is None:
        return None, ""
    data = up.getvalue()
    if len(data) > MAX_CONFIG_BYTES:
        raise InputError(
            f"{len(data):,} bytes is over the {MAX_CONFIG_BYTES:,}-byte limit of a {what}",
            file=up.name,
        )
    try:
        return data.decode("utf-8"), up.name
    except UnicodeDecodeError as exc:
        raise InputError(f"is not UTF-8 text (byte {exc.start})", file=up.name) from None


def summary(spec: ModelSpec) -> str:
    """'48 layers, 30.5B parameters (3.3B active), 128 experts, bf16'."""
    text = f"{spec.num_layers} layers, {spec.total_params / 1e9:.1f}B parameters"
    if spec.is_moe:
        text += f" ({spec.active_params / 1e9:.1f}B active), {spec.num_experts} experts"
    if spec.is_mla:
        text += ", MLA attention"
    return f"{text}, {spec.checkpoint_dtype} weights"


def _take(config: str, quant: str | None, file_name: str, on_target: Callable) -> None:

    name = default_name(config, file_name)
    mid = model_id(name)
    try:
        spec = parse(config, quant, mid)
    except UNREAD as exc:
        _message(False, f"Not read: {plain(_why(exc))}")
        return
    session_models()[mid] = OwnModel(config, quant, digest_of(config, quant))
    st.session_state["target"] = mid
    on_target()
    _message(True, f"Planning with {plain(mid)}: {summary(spec)}.")


def _take_upload(on_target: Callable) -> None:

    try:
        config, file_name = _read_upload(UPLOAD_KEY, "config.json")
        quant, _ = _read_upload(QUANT_KEY, "hf_quant_config.json")
    except InputError as exc:
        _message(False, f"Not read: {plain(exc)}")
        return
    if config is None:
        pasted = str(st.session_state.get(PASTE_KEY) or "")
        if pasted.strip() and quant is not None:
            _take(pasted, quant, "", on_target)
        elif quant is not None:
            _message(True, "hf_quant_config.json is read with the config.json: add it.")
        return
    _take(config, quant, file_name, on_target)


def _take_paste(on_target: Callable) -> None:

    pasted = str(st.session_state.get(PASTE_KEY) or "")
    if not pasted.strip():
        _message(False, "Paste the text of a config.json first.")
        return
    try:
        quant, _ = _read_upload(QUANT_KEY, "hf_quant_config.json")
    except InputError as exc:
        _message(False, f"Not read: {plain(exc)}")
        return
    _take(pasted, quant, "", on_target)


def _save(mid: str, name_key: str, on_target: Callable) -> None:
    from library.kinds import save_model

    own = session_models().get(mid)
    lib, why = library()
    if own is None or lib is None:
        _message(False, f"Not saved: {plain(why or 'the model is no longer in this session')}.")
        return
    name = str(st.session_state.get(name_key) or "").strip() or mid.removeprefix(PREFIX)
    try:
        saved = save_model(lib, name, own.config, own.quant, who=who())
    except InputError as exc:  # NameTaken says to choose another name
        _message(False, f"Not saved: {plain(exc)}")
        return
    kept_name = saved.entry.name
    forget_kept_list()
    # The library now holds it: every session's choices have it under the kept name.
    session_models().pop(mid, None)
    st.session_state["target"] = model_id(kept_name)
    on_target()
    said = "Already kept as" if saved.existed else "Saved as"
    _message(True, f"{said} '{plain(kept_name)}': a target choice in every session.")


def control(target: str, on_target: Callable[[], None]) -> None:
    """The sidebar's "Your model (config.json)" expander, below the target choice:
    upload or paste a config.json (a hf_quant_config.json beside it), save this session's
    model to the library. `on_target` runs after it sets the target (the acceptance
    input's refill)."""
    message = st.session_state.pop(MSG_KEY, None)
    own = target in session_models()
    with st.sidebar.expander("Your model (config.json)", expanded=bool(message) or own):
        upload, paste = st.tabs(["Upload", "Paste"])
        with upload:
            st.file_uploader(
                "config.json",
                type=["json"],
                key=UPLOAD_KEY,
                max_upload_size=MAX_UPLOAD_MB,
                on_change=_take_upload,
                args=(on_target,),
                help="A Hugging Face checkpoint's config.json: it becomes a target choice on "
                "every page for this session. Read as data, never run.",
            )
            st.file_uploader(
                "hf_quant_config.json (optional)",
                type=["json"],
                key=QUANT_KEY,
                max_upload_size=MAX_UPLOAD_MB,
                on_change=_take_upload,
                args=(on_target,),
                help="ModelOpt's quantization file, where the checkpoint has one (FP8, NVFP4).",
            )
        with paste:
            st.text_area(
                "config.json's text",
                key=PASTE_KEY,
                height=120,
                max_chars=MAX_PASTE_CHARS,
                placeholder='{"architectures": ["Qwen3ForCausalLM"], ...}',
            )
            st.button(
                "Use pasted config", key="own_use_paste", on_click=_take_paste, args=(on_target,)
            )
        if message:
            ok, text = message
            # The text is already escaped (plain) where it quotes the user's input.
            (st.success if ok else st.error)(text, icon=":material/check:" if ok else None)
        if own:
            _save_form(target, on_target)
        _kept_caption()


def _save_form(mid: str, on_target: Callable) -> None:
    lib, why = library()
    if lib is None:
        st.caption(f"No library ({why}): this model lasts for this session only.")
        return
    name_key = f"own_save_name:{session_models()[mid].digest[:12]}"
    st.text_input("Name in the library", value=mid.removeprefix(PREFIX), key=name_key)
    st.button(
        "Save model to library",
        key="own_save",
        icon=":material/save:",
        on_click=_save,
        args=(mid, name_key, on_target),
    )


def _kept_caption() -> None:

    models = kept()
    names = [plain(mid) for mid, (_, spec, _) in models.items() if spec is not None]
    if names:
        st.caption("In the library (target choices): " + ", ".join(names) + ".")
    refused = [(mid, why) for mid, (_, spec, why) in models.items() if spec is None]
    for mid, why in refused[:3]:
        st.caption(f"{plain(mid)} is kept but not read today: {plain(why)}")
