"""A generated recall check for the value index, independent of spider-pg: tables of people,
places, codes, titles, organisations and categories, and mentions of their values that differ
the way users' words do (case, accents, typos, plurals, adjectives and demonyms, word order,
abbreviations, partial names). Each mention is asked inside a question; a hit is the stored
value among nl2sql.search_values(question, 5) for its column. Deterministic for a seed.

    python bench/recall.py --host /tmp/dev/pg --port 57510      (or through bench.py, part 7)
"""
import argparse
import random
import unicodedata

import psycopg

FIRST = ["Amelia", "Bruno", "Chiara", "Dmitri", "Elena", "Farid", "Greta", "Hugo", "Ingrid", "Jonas", "Keiko",
         "Lars", "Marta", "Nikolai", "Olga", "Pedro", "Quentin", "Rosa", "Stefan", "Tomasz", "Ursula", "Viktor",
         "Wanda", "Xavier", "Yusuf", "Zofia", "Anders", "Beatriz", "Cormac", "Dagny"]
LAST = ["Abernathy", "Bergström", "Castellano", "Dąbrowski", "Eriksen", "Fontaine", "Gallagher", "Hoffmann",
        "Iglesias", "Jankowski", "Kowalczyk", "Lindqvist", "Moreau", "Nakamura", "Okonkwo", "Petrović", "Quinlan",
        "Rasmussen", "Schäfer", "Takahashi", "Underwood", "Vasquez", "Whitfield", "Yilmaz", "Zielinski", "Müller",
        "Novák", "Ólafsson", "Szabó", "Çelik"]
CITIES = ["Zürich", "São Paulo", "Kraków", "Montréal", "Málaga", "Düsseldorf", "Reykjavík", "Malmö", "Besançon",
          "Córdoba", "Gdańsk", "Łódź", "Bogotá", "Genève", "Köln", "Brașov", "Tromsø", "Nîmes", "Cádiz", "Linköping",
          "Aberdeen", "Inverness", "Galway", "Bergen", "Tampere", "Utrecht", "Porto", "Lyon", "Turin", "Graz"]
# (country as stored, the adjective or demonym a question uses)
COUNTRIES = [("France", "French"), ("Germany", "German"), ("Spain", "Spanish"), ("Italy", "Italian"),
             ("Netherlands", "Dutch"), ("Sweden", "Swedish"), ("Norway", "Norwegian"), ("Poland", "Polish"),
             ("Japan", "Japanese"), ("China", "Chinese"), ("Brazil", "Brazilian"), ("Mexico", "Mexican"),
             ("Canada", "Canadian"), ("Ireland", "Irish"), ("Scotland", "Scottish"), ("Greece", "Greek"),
             ("Turkey", "Turkish"), ("Egypt", "Egyptian"), ("India", "Indian"), ("Portugal", "Portuguese"),
             ("Switzerland", "Swiss"), ("Denmark", "Danes"), ("Finland", "Finns"), ("Belgium", "Belgian"),
             ("Hungary", "Hungarian"), ("Austria", "Austrian"), ("Chile", "Chilean"), ("Peru", "Peruvian"),
             ("Vietnam", "Vietnamese"), ("Kenya", "Kenyan")]
TITLE_WORDS = ["Silent", "River", "Northern", "Sea", "Midnight", "Garden", "Broken", "Crown", "Hidden", "Valley",
               "Iron", "Harbour", "Winter", "Orchard", "Glass", "Mountain", "Paper", "Lantern", "Golden", "Meadow",
               "Distant", "Shore", "Painted", "Desert", "Secret", "Library", "Burning", "Bridge", "Last", "Summer"]
ORG_NAMES = ["Northfield", "Ashcombe", "Brightwater", "Calder", "Dunmore", "Eastbrook", "Fairhaven", "Glenrock",
             "Holloway", "Kingsbridge", "Larchmont", "Millbrook", "Oakridge", "Pinecrest", "Redfern", "Stonegate"]
# (long form as stored, abbreviation a question uses)
ORG_KINDS = [("University", "Univ"), ("International", "Intl"), ("Corporation", "Corp"), ("Saint", "St"),
             ("Hospital", "Hosp"), ("Department", "Dept"), ("Company", "Co"), ("Mount", "Mt")]
CATEGORIES = ["Airline", "Bakery", "Church", "Brewery", "Pharmacy", "Library", "Museum", "Hotel", "Restaurant",
              "Bookshop", "Garage", "Factory", "Warehouse", "Dentist", "Bank", "Theatre", "Stadium", "Laundry",
              "Vineyard", "Nursery"]
TEMPLATES = ["How many records mention {m}?", "Show everything about {m}", "Which entries are linked to {m}?",
             "List the orders for {m}", "What do we know about {m}?", "Give me the rows with {m}"]


def strip_accents(s):
    return "".join(c for c in unicodedata.normalize("NFKD", s) if not unicodedata.combining(c))


def typo(rnd, s):
    """One edit a hurried typist makes, inside a word of at least 5 letters (never the first letter)."""
    words = s.split(" ")
    long = [i for i, w in enumerate(words) if len(w) >= 5]
    if not long:
        return s
    i = rnd.choice(long)
    w = words[i]
    j = rnd.randrange(1, len(w) - 1)
    kind = rnd.randrange(3)
    if kind == 0:
        w = w[:j] + w[j + 1] + w[j] + w[j + 2:]          # transposition
    elif kind == 1:
        w = w[:j] + w[j + 1:]                              # deletion
    else:
        w = w[:j] + rnd.choice("aeiourstnl") + w[j + 1:]   # substitution
    words[i] = w
    return " ".join(words)


def plural(w):
    lw = w.lower()
    if lw.endswith("y") and lw[-2] not in "aeiou":
        return lw[:-1] + "ies"
    if lw.endswith(("s", "ch", "sh", "x")):
        return lw + "es"
    return lw + "s"


def generate(seed):
    """The tables' rows and the mentions: {table: (column, [values])}, [(kind, table, column, value, mention)]."""
    rnd = random.Random(seed)
    people = sorted({f"{f} {l}" for f, l in zip(rnd.sample(FIRST * 3, 60), rnd.sample(LAST * 3, 60))})
    titles = sorted({f"The {a} {b}" if rnd.random() < 0.5 else f"{a} {b} of the {c}"
                     for a, b, c in (rnd.sample(TITLE_WORDS, 3) for _ in range(60))})
    orgs = []
    for name in ORG_NAMES:
        long, short = rnd.choice(ORG_KINDS)
        orgs.append((f"{long} {name} Hospital" if long in ("Saint", "Mount") else f"{name} {long}", long, short))
    codes = sorted({f"{rnd.choice('ABCDEFGHKLMNPRSTXZ')}{rnd.choice('ABCDEFGHKLMNPRSTXZ')}-{rnd.randrange(1000, 9999)}"
                    for _ in range(60)} | {"LHR", "CDG", "JFK", "AMS", "FRA", "MAD"})
    tables = {
        "rc_people": ("full_name", people),
        "rc_places": ("city", CITIES),
        "rc_countries": ("country", [c for c, _ in COUNTRIES]),
        "rc_titles": ("title", titles),
        "rc_orgs": ("org_name", [o for o, _, _ in orgs]),
        "rc_codes": ("code", codes),
        "rc_categories": ("category", CATEGORIES + ["Books", "Toys", "Tools"]),
    }
    m = []
    last_count = {}
    for p in people:
        last_count[p.split()[-1]] = last_count.get(p.split()[-1], 0) + 1
    for p in rnd.sample(people, 30):
        first, last = p.split(" ", 1)
        m.append(("case", "rc_people", "full_name", p, p.upper() if rnd.random() < 0.5 else p.lower()))
        m.append(("typo", "rc_people", "full_name", p, typo(rnd, p)))
        m.append(("word order", "rc_people", "full_name", p, f"{last}, {first}" if rnd.random() < 0.5 else f"{last} {first}"))
        m.append(("accents", "rc_people", "full_name", p, strip_accents(p)))
        if last_count[last] == 1:
            m.append(("partial", "rc_people", "full_name", p, last))
    for c in CITIES:
        m.append(("accents", "rc_places", "city", c, strip_accents(c).lower()))
        m.append(("typo", "rc_places", "city", c, typo(rnd, c)))
    for country, adjective in COUNTRIES:
        m.append(("demonym", "rc_countries", "country", country, adjective))
        m.append(("case", "rc_countries", "country", country, country.lower()))
    for t in rnd.sample(titles, 30):
        words = t.split()
        m.append(("typo", "rc_titles", "title", t, typo(rnd, t)))
        m.append(("partial", "rc_titles", "title", t, " ".join(w for w in words if w not in ("The", "of", "the"))[:40]))
        content = [w for w in words if w not in ("The", "of", "the")]
        m.append(("word order", "rc_titles", "title", t, " ".join(reversed(content))))
    for org, long, short in orgs:
        m.append(("abbreviation", "rc_orgs", "org_name", org, org.replace(long, short)))
        m.append(("partial", "rc_orgs", "org_name", org, org.replace(long, "").replace("Hospital", "").strip()))
        m.append(("case", "rc_orgs", "org_name", org, org.lower()))
    for code in rnd.sample(codes, 30):
        m.append(("case", "rc_codes", "code", code, code.lower()))
        if "-" in code:
            m.append(("spacing", "rc_codes", "code", code, code.replace("-", " ")))
            m.append(("spacing", "rc_codes", "code", code, code.replace("-", "")))
    for c in CATEGORIES:
        m.append(("plural", "rc_categories", "category", c, plural(c)))
        m.append(("typo", "rc_categories", "category", c, typo(rnd, c)))
    for c in ["Books", "Toys", "Tools"]:
        m.append(("singular", "rc_categories", "category", c, c[:-1].lower()))
    return tables, m


def load(conn, tables):
    conn.execute("SET client_min_messages = warning")
    for name, (column, values) in tables.items():
        conn.execute(f"DROP TABLE IF EXISTS {name}")
        conn.execute(f"CREATE TABLE {name} (id serial PRIMARY KEY, {column} text, note text)")
        with conn.cursor().copy(f"COPY {name} ({column}, note) FROM STDIN") as cp:
            for v in values:
                cp.write_row((v, "x"))
        conn.execute(f"SELECT * FROM nl2sql.create_value_index('{name}', '{column}')").fetchall()


def measure(conn, mentions, seed, k=5):
    """Recall@k per kind of mention; returns (found, total, misses)."""
    rnd = random.Random(seed + 1)
    by_kind, misses = {}, []
    for kind, table, column, value, mention in mentions:
        question = rnd.choice(TEMPLATES).format(m=mention)
        got = conn.execute("SELECT relation::text, column_name::text, value FROM nl2sql.search_values(%s, %s)",
                           (question, k)).fetchall()
        hit = any(r == table and c == column and v == value for r, c, v in got)
        agg = by_kind.setdefault(kind, [0, 0])
        agg[0] += hit
        agg[1] += 1
        if not hit:
            misses.append((kind, value, question, [v for _, _, v in got]))
    return by_kind, misses


def report(by_kind, misses, show=12):
    print(f"{'mention':<14}{'n':>5}{'found':>7}{'recall':>8}")
    found = total = 0
    for kind in sorted(by_kind):
        f, t = by_kind[kind]
        found, total = found + f, total + t
        print(f"{kind:<14}{t:>5}{f:>7}{f / t:>8.3f}")
    print("-" * 34)
    print(f"{'all':<14}{total:>5}{found:>7}{found / total:>8.3f}")
    for kind, value, q, got in misses[:show]:
        print(f"  missed ({kind}) {value!r} for {q!r}; got {got}")
    return found, total


def run(kw, seed=1, db="bench_recall"):
    with psycopg.connect(dbname="postgres", autocommit=True, **kw) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{db}"')
        c.execute(f'CREATE DATABASE "{db}"')
    try:
        with psycopg.connect(dbname=db, autocommit=True, **kw) as c:
            c.execute("SET client_min_messages = warning")
            c.execute("CREATE EXTENSION nl2sql CASCADE")
            tables, mentions = generate(seed)
            load(c, tables)
            print(f"  {sum(len(v) for _, v in tables.values())} values in {len(tables)} tables, {len(mentions)} mentions, seed {seed}")
            by_kind, misses = measure(c, mentions, seed)
            return report(by_kind, misses)
    finally:
        with psycopg.connect(dbname="postgres", autocommit=True, **kw) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--user", default="postgres")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    run({"host": a.host, "port": a.port, "user": a.user}, a.seed)
