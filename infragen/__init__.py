"""infragen: size, price and provision LLM inference deployments.

Importing this package is cheap and side-effect free: no data is loaded and
neither Pulumi nor jinja2 is imported until a command needs them.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
