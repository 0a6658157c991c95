/* Unit tests of server/webhook.c: the retry schedule (exponential from the base, capped). The
 * delivery itself is tested end to end in tests/integration/it_ops.c. */
#include "tap.h"
#include "../../server/webhook.h"

int main(void)
{
	TAP_INT_EQ(webhook_backoff_ms(1, 1000, 300000), 1000, "after try 1: the base");
	TAP_INT_EQ(webhook_backoff_ms(2, 1000, 300000), 2000, "after try 2: doubled");
	TAP_INT_EQ(webhook_backoff_ms(3, 1000, 300000), 4000, "after try 3: doubled again");
	TAP_INT_EQ(webhook_backoff_ms(9, 1000, 300000), 256000, "after try 9: 2^8 times the base");
	TAP_INT_EQ(webhook_backoff_ms(10, 1000, 300000), 300000, "after try 10: the ceiling");
	TAP_INT_EQ(webhook_backoff_ms(1000000, 1000, 300000), 300000, "huge try counts stay at the ceiling");
	TAP_INT_EQ(webhook_backoff_ms(0, 1000, 300000), 1000, "try 0 reads as the first");
	TAP_INT_EQ(webhook_backoff_ms(3, 5000, 3000), 3000, "a base above the ceiling is capped");
	return TAP_DONE();
}
