"""A wide schema of our own for the benchmarks: 1,000 tables of 20-50 columns with realistic
names and comments, in ten schemas (business areas), each table joined by a foreign key to an
earlier one of its area. Deterministic (seed); rows are few (the point is the catalog)."""
import random

import psycopg
from psycopg import sql as pgsql

AREAS = ["sales", "purchasing", "inventory", "finance", "hr", "logistics", "marketing", "support", "manufacturing", "legal"]
ENTITIES = ["customer", "supplier", "product", "order", "invoice", "payment", "shipment", "warehouse", "employee",
            "department", "campaign", "lead", "ticket", "contract", "asset", "budget", "account", "region", "store",
            "vehicle", "route", "machine", "batch", "recipe", "claim", "policy", "vendor", "project", "task", "team"]
QUALIFIERS = ["", "line", "history", "snapshot", "archive", "detail", "summary", "plan", "audit", "forecast",
              "event", "note", "rating", "schedule", "status_log", "attachment", "adjustment", "target", "quota", "tag"]
# (column name pattern, type, comment): {e} is the table's entity.
COLUMNS = [
    ("{e}_code", "text", "Business code of the {e}, unique within its area"),
    ("name", "text", "Display name"), ("description", "text", "Free-text description"),
    ("status", "text", "Lifecycle status: active, suspended or closed"),
    ("created_at", "timestamptz", "When the row was created"), ("updated_at", "timestamptz", "When the row last changed"),
    ("valid_from", "date", "First day the record applies"), ("valid_to", "date", "Last day the record applies"),
    ("amount", "numeric(12,2)", "Amount in the record's currency"), ("currency", "text", "ISO 4217 currency code"),
    ("quantity", "integer", "Number of units"), ("unit_price", "numeric(12,2)", "Price of one unit"),
    ("discount_pct", "numeric(5,2)", "Discount in percent"), ("tax_rate", "numeric(5,2)", "Tax rate in percent"),
    ("country", "text", "Country name"), ("city", "text", "City name"), ("postal_code", "text", "Postal code"),
    ("email", "text", "Contact e-mail address"), ("phone", "text", "Contact phone number"),
    ("owner_name", "text", "Person responsible for the {e}"), ("priority", "integer", "Priority, 1 (highest) to 5"),
    ("is_active", "boolean", "Whether the {e} is in use"), ("is_deleted", "boolean", "Soft-delete flag"),
    ("score", "numeric(6,2)", "Quality score from 0 to 100"), ("weight_kg", "numeric(10,3)", "Weight in kilograms"),
    ("due_date", "date", "Date by which it is due"), ("closed_at", "timestamptz", "When it was closed"),
    ("category", "text", "Category within the area"), ("channel", "text", "Channel it came through"),
    ("external_ref", "text", "Identifier in the source system"), ("notes", "text", "Internal notes"),
    ("approved_by", "text", "Name of the approver"), ("approved_at", "timestamptz", "When it was approved"),
    ("cost_center", "text", "Cost center charged"), ("margin", "numeric(12,2)", "Gross margin"),
    ("rank", "integer", "Rank within its category"), ("year", "integer", "Fiscal year"), ("month", "integer", "Month, 1 to 12"),
    ("latitude", "numeric(9,6)", "Latitude in degrees"), ("longitude", "numeric(9,6)", "Longitude in degrees"),
    ("source", "text", "System that produced the row"), ("version", "integer", "Row version"),
    ("language", "text", "Language code"), ("rating", "integer", "Rating from 1 to 5"),
    ("balance", "numeric(14,2)", "Current balance"), ("limit_amount", "numeric(14,2)", "Credit or spending limit"),
    ("start_time", "timestamptz", "Start of the period"), ("end_time", "timestamptz", "End of the period"),
]
VALUES = {"text": "'x' || (g % 11)", "timestamptz": "timestamptz '2024-01-01' + g * interval '1 day'",
          "date": "date '2024-01-01' + g", "integer": "g % 9", "boolean": "g % 2 = 0"}


def plan(tables=1000, min_columns=20, max_columns=50, seed=1):
    """The tables: (schema, name, entity, columns, referenced table or None), in creation order."""
    rng = random.Random(seed)
    names, out = set(), []
    per_area = tables // len(AREAS)
    for area in AREAS:
        made = []
        while len(made) < per_area:
            entity, qual = rng.choice(ENTITIES), rng.choice(QUALIFIERS)
            name = f"{entity}_{qual}" if qual else entity
            if (area, name) in names:
                name = f"{name}_{len(made)}"
            names.add((area, name))
            cols = rng.sample(COLUMNS, rng.randint(min_columns, min(max_columns, len(COLUMNS))))
            ref = rng.choice(made) if made else None
            made.append(name)
            out.append((area, name, entity, cols, ref))
    return out


def create(kw, db, tables=1000, min_columns=20, max_columns=50, rows=20, seed=1):
    """Creates `db` with the planned tables (once: a database comment marks it complete)."""
    with psycopg.connect(dbname="postgres", autocommit=True, **kw) as c:
        done = c.execute("SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s", (db,)).fetchone()
        if done and done[0] == "complete":
            return plan(tables, min_columns, max_columns, seed)
        c.execute(pgsql.SQL("DROP DATABASE IF EXISTS {}").format(pgsql.Identifier(db)))
        c.execute(pgsql.SQL("CREATE DATABASE {}").format(pgsql.Identifier(db)))
    tables_plan = plan(tables, min_columns, max_columns, seed)
    with psycopg.connect(dbname=db, autocommit=True, **kw) as c:
        c.execute("SET client_min_messages = warning")
        for area in AREAS:
            c.execute(pgsql.SQL("CREATE SCHEMA {}").format(pgsql.Identifier(area)))
            c.execute(pgsql.SQL("COMMENT ON SCHEMA {} IS {}").format(pgsql.Identifier(area), pgsql.Literal(f"The {area} area")))
        for area, name, entity, cols, ref in tables_plan:
            t = pgsql.Identifier(area, name)
            defs = [pgsql.SQL("id integer PRIMARY KEY")]
            if ref:
                defs.append(pgsql.SQL("{} integer REFERENCES {} (id)").format(pgsql.Identifier(f"{ref}_id"), pgsql.Identifier(area, ref)))
            for col, typ, _ in cols:
                defs.append(pgsql.SQL("{} {}").format(pgsql.Identifier(col.format(e=entity)), pgsql.SQL(typ)))
            c.execute(pgsql.SQL("CREATE TABLE {} ({})").format(t, pgsql.SQL(", ").join(defs)))
            c.execute(pgsql.SQL("COMMENT ON TABLE {} IS {}").format(t, pgsql.Literal(f"{name.replace('_', ' ').capitalize()} records of the {area} area")))
            for col, typ, comment in cols:
                c.execute(pgsql.SQL("COMMENT ON COLUMN {}.{} IS {}").format(t, pgsql.Identifier(col.format(e=entity)), pgsql.Literal(comment.format(e=entity))))
            exprs = [pgsql.SQL("g")] + ([pgsql.SQL("NULL")] if ref else [])
            for _, typ, _ in cols:
                exprs.append(pgsql.SQL(VALUES.get(typ, "g * 1.5")))
            c.execute(pgsql.SQL("INSERT INTO {} SELECT {} FROM generate_series(1, {}) g").format(t, pgsql.SQL(", ").join(exprs), pgsql.Literal(rows)))
        c.execute("ANALYZE")
        c.execute(pgsql.SQL("COMMENT ON DATABASE {} IS 'complete'").format(pgsql.Identifier(db)))
    return tables_plan
