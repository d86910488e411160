#include "auth/offload.h"

enum { FREE = 0, FORBIDDEN, MOVING };

static __thread int state = FREE;

void berth_offload_enter(int may)
{
    state = may ? FREE : FORBIDDEN;
}

int berth_offload_here(void)
{
    if (state == FREE)
        return 1;
    state = MOVING;
    return 0;
}

int berth_offload_forbidden(void)
{
    return state == FORBIDDEN;
}

int berth_offload_moving(void)
{
    return state == MOVING;
}

int berth_offload_leave(void)
{
    int moving = state == MOVING;
    state = FREE;
    return moving;
}
