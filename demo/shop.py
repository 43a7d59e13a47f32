#!/usr/bin/env python3
"""Writes demo/shop.sql, the sample database `make demo` loads and the README's examples use:
a small online shop (customers, products, orders, order lines, reviews), a few hundred rows
drawn with a fixed seed, so the file is the same on every machine.

Two relationships are left undeclared, as they often are in real databases: order_lines.product_id
and reviews.product_id point at products with no FOREIGN KEY, so nl2sql.profile_relationships()
has something to find.

    python3 demo/shop.py            writes demo/shop.sql
    python3 demo/shop.py --check    exit 1 when demo/shop.sql is not what this script writes
"""
import datetime
import random
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "shop.sql"
SEED = 20261201

FIRST = ["Mia", "Lena", "Noah", "Elias", "Sofia", "Lucas", "Emma", "Hugo", "Clara", "Luca", "Nora", "Jonas",
         "Ines", "Mateo", "Alba", "Felix", "Chloe", "Tomas", "Ana", "Leo"]
LAST = ["Keller", "Vogel", "Martin", "Dubois", "Rossi", "Garcia", "Silva", "Jansen", "Novak", "Berg", "Costa",
        "Laurent", "Weber", "Moreau", "Ferrari", "Lopez"]
CITIES = [("Lyon", "France"), ("Paris", "France"), ("Berlin", "Germany"), ("Hamburg", "Germany"),
          ("Madrid", "Spain"), ("Porto", "Portugal"), ("Milan", "Italy"), ("Amsterdam", "Netherlands")]
PRODUCTS = [
    ("Ethiopia Yirgacheffe beans 250 g", "Coffee", 11.90), ("Colombia Huila beans 1 kg", "Coffee", 34.50),
    ("Espresso blend 500 g", "Coffee", 16.80), ("Decaf Brazil beans 250 g", "Coffee", 10.40),
    ("Sencha green tea 100 g", "Tea", 8.90), ("Earl Grey tea 100 g", "Tea", 6.50),
    ("Rooibos vanilla 100 g", "Tea", 7.20), ("Oolong Tie Guan Yin 50 g", "Tea", 12.00),
    ("Pour-over dripper", "Equipment", 24.00), ("Hand grinder", "Equipment", 59.00),
    ("Gooseneck kettle", "Equipment", 45.00), ("French press 1 l", "Equipment", 29.50),
    ("Paper filters (100)", "Accessories", 4.90), ("Milk frothing jug", "Accessories", 14.90),
    ("Ceramic mug", "Accessories", 9.90), ("Tea infuser", "Accessories", 5.50),
    ("Dark chocolate 70 %", "Snacks", 3.90), ("Almond biscotti", "Snacks", 5.20),
]
STATUSES = [("delivered", 70), ("shipped", 12), ("pending", 8), ("cancelled", 10)]
N_CUSTOMERS, N_ORDERS = 40, 160
START, DAYS = datetime.date(2025, 1, 1), 668   # orders from 2025-01-01 to 2026-10-30

SCHEMA = """\
-- The sample database of `make demo` and the README: a small online shop selling coffee, tea
-- and what goes with them. Written by demo/shop.py (seed {seed}); do not edit by hand.
SET client_min_messages = warning;

CREATE TABLE customers (
    customer_id integer PRIMARY KEY,
    name text NOT NULL,
    email text NOT NULL UNIQUE,
    city text NOT NULL,
    country text NOT NULL,
    signed_up date NOT NULL
);
COMMENT ON TABLE customers IS 'People who have an account with the shop';

CREATE TABLE products (
    product_id integer PRIMARY KEY,
    name text NOT NULL,
    category text NOT NULL,
    unit_price numeric(8,2) NOT NULL,
    in_stock boolean NOT NULL DEFAULT true
);
COMMENT ON COLUMN products.unit_price IS 'Current list price in euros';

CREATE TABLE orders (
    order_id integer PRIMARY KEY,
    customer_id integer NOT NULL REFERENCES customers,
    ordered_at date NOT NULL,
    status text NOT NULL CHECK (status IN ('pending', 'shipped', 'delivered', 'cancelled'))
);

-- product_id has no FOREIGN KEY: nl2sql.profile_relationships() finds it.
CREATE TABLE order_lines (
    order_id integer NOT NULL REFERENCES orders,
    line_no integer NOT NULL,
    product_id integer NOT NULL,
    quantity integer NOT NULL CHECK (quantity > 0),
    unit_price numeric(8,2) NOT NULL,
    PRIMARY KEY (order_id, line_no)
);
COMMENT ON COLUMN order_lines.unit_price IS 'Price paid per unit, in euros';

-- product_id has no FOREIGN KEY either.
CREATE TABLE reviews (
    review_id integer PRIMARY KEY,
    product_id integer NOT NULL,
    customer_id integer NOT NULL REFERENCES customers,
    rating integer NOT NULL CHECK (rating BETWEEN 1 AND 5),
    written_at date NOT NULL
);
"""


def sql_text(s):
    return "'" + s.replace("'", "''") + "'"


def rows(table, values):
    return f"INSERT INTO {table} VALUES\n" + ",\n".join("    (" + ", ".join(v) + ")" for v in values) + ";\n"


def build():
    rnd = random.Random(SEED)
    names = set()
    customers = []
    while len(customers) < N_CUSTOMERS:
        first, last = rnd.choice(FIRST), rnd.choice(LAST)
        if (first, last) in names:
            continue
        names.add((first, last))
        city, country = rnd.choice(CITIES)
        cid = len(customers) + 1
        signed = START - datetime.timedelta(days=rnd.randrange(30, 900))
        customers.append((cid, f"{first} {last}", f"{first}.{last}@example.com".lower(), city, country, signed))
    products = [(i, n, c, p, rnd.random() > 0.1) for i, (n, c, p) in enumerate(PRODUCTS, 1)]
    orders, lines = [], []
    for oid in range(1001, 1001 + N_ORDERS):
        cust = customers[min(int(rnd.paretovariate(1.2)) - 1, N_CUSTOMERS - 1) if rnd.random() < 0.4
                         else rnd.randrange(N_CUSTOMERS)]
        day = START + datetime.timedelta(days=rnd.randrange(DAYS))
        day = max(day, cust[5])
        status = rnd.choices([s for s, _ in STATUSES], [w for _, w in STATUSES])[0]
        orders.append((oid, cust[0], day, status))
        for line_no, prod in enumerate(rnd.sample(products, rnd.choice([1, 1, 2, 2, 3, 4])), 1):
            price = prod[3] if rnd.random() > 0.2 else round(prod[3] * 0.9, 2)
            lines.append((oid, line_no, prod[0], rnd.choice([1, 1, 1, 2, 2, 3, 6]), price))
    reviews = []
    delivered = [o for o in orders if o[3] == "delivered"]
    for rid in range(1, 61):
        o = rnd.choice(delivered)
        prod = rnd.choice([ln for ln in lines if ln[0] == o[0]])[2]
        reviews.append((rid, prod, o[1], rnd.choices([1, 2, 3, 4, 5], [1, 1, 3, 6, 8])[0],
                        o[2] + datetime.timedelta(days=rnd.randrange(3, 40))))

    out = [SCHEMA.format(seed=SEED), ""]
    out.append(rows("customers", [(str(c), sql_text(n), sql_text(e), sql_text(ci), sql_text(co), sql_text(d.isoformat()))
                                  for c, n, e, ci, co, d in customers]))
    out.append(rows("products", [(str(i), sql_text(n), sql_text(c), f"{p:.2f}", "true" if s else "false")
                                 for i, n, c, p, s in products]))
    out.append(rows("orders", [(str(o), str(c), sql_text(d.isoformat()), sql_text(s)) for o, c, d, s in orders]))
    out.append(rows("order_lines", [(str(o), str(n), str(p), str(q), f"{u:.2f}") for o, n, p, q, u in lines]))
    out.append(rows("reviews", [(str(r), str(p), str(c), str(g), sql_text(d.isoformat())) for r, p, c, g, d in reviews]))
    out.append("ANALYZE;\n")
    return "\n".join(out)


def main():
    text = build()
    if sys.argv[1:] == ["--check"]:
        if not OUT.is_file() or OUT.read_text() != text:
            print(f"{OUT.name} is not what demo/shop.py writes: run python3 demo/shop.py", file=sys.stderr)
            sys.exit(1)
        return
    OUT.write_text(text)


if __name__ == "__main__":
    main()
