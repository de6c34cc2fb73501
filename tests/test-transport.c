/* SPDX-License-Identifier: LGPL-2.1-or-later */
int main(void) { return 1; }
