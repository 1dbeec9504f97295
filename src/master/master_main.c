/* placeholder replaced by the master module */
int main(void) { return 0; }
