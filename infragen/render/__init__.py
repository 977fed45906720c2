"""Rendering: a Plan becomes each node role's cloud-init user-data (see docs/bootstrap.md).

Reads only the Plan; never sizes, never provisions, never sees a secret value (nodes read secrets by name at boot).
"""

from infragen.render.cloud_init import (
    DEFAULT_HEAD_ADDRESS,
    LLAMA_CPP_REPO,
    TEMPLATES_DIR,
    USER_DATA_MAX_BYTES,
    node_roles,
    render_all,
    render_user_data,
)

__all__ = [
    "DEFAULT_HEAD_ADDRESS",
    "LLAMA_CPP_REPO",
    "TEMPLATES_DIR",
    "USER_DATA_MAX_BYTES",
    "node_roles",
    "render_all",
    "render_user_data",
]
