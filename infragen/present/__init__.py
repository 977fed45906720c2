"""Views of a Plan for people: the HTML report and its inline SVG charts.

Formatting only: every figure comes from the Plan; nothing here plans, fetches or imports a plotting library.
"""
