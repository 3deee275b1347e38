"""Tests of hack/mutants.py: the defects parse, and each block of hack/mutants.txt occurs exactly
once in the file it names, so the list stays planted where the code is.

Run: python3 -m unittest discover -s hack -p 'test_*.py'
"""

import importlib.util
import unittest
from pathlib import Path

SPEC = importlib.util.spec_from_file_location("mutants", Path(__file__).with_name("mutants.py"))
mutants = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(mutants)


class MutantsTest(unittest.TestCase):
    def test_every_block_occurs_once_and_changes_its_file(self):
        listed = mutants.parse((mutants.ROOT / "hack/mutants.txt").read_text())
        self.assertGreaterEqual(len(listed), 30)
        for m in listed:
            with self.subTest(m.id):
                text = (mutants.ROOT / m.file).read_text()
                self.assertNotEqual(m.apply(text), text)

    def test_a_block_is_replaced_or_removed_and_must_be_unique(self):
        [replaced, removed] = mutants.parse(
            "## a | f | one\n- x = 1\n+ x = 2\n\n## b | f | two\n- y\n- z\n= equivalent: no reader\n"
        )
        self.assertEqual(replaced.apply("w\nx = 1\n"), "w\nx = 2\n")
        self.assertEqual(removed.apply("y\nz\nq\n"), "q\n")
        self.assertEqual(removed.equivalent, "no reader")
        with self.assertRaisesRegex(ValueError, "occurs 2 times"):
            replaced.apply("x = 1\nx = 1\n")
        with self.assertRaisesRegex(ValueError, "occurs 0 times"):
            replaced.apply("x = 3\n")
        with self.assertRaisesRegex(ValueError, "used twice"):
            mutants.parse("## a | f | one\n- x\n## a | f | two\n- y\n")


if __name__ == "__main__":
    unittest.main()
